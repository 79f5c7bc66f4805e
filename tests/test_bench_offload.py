"""The offload benchmark runs as the notebook's closing note says, and its table is the model's."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from servelab.kv.offload.cost import (
    HOST_LINK,
    LLAMA_8B,
    NVME_LINK,
    load_seconds,
    recompute_seconds,
    simulate_load,
    simulate_prefill,
    ttft,
)

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_offload.py"


def test_the_closed_forms_agree_with_the_simulator() -> None:
    for n in (256, 1000, 8192, 32768):
        sim = simulate_prefill(LLAMA_8B, 0, n, 400e12)
        assert recompute_seconds(LLAMA_8B, n) == pytest.approx(sim, rel=1e-9)
        for link in (HOST_LINK, NVME_LINK):
            assert load_seconds(LLAMA_8B, n, link) == pytest.approx(
                simulate_load(LLAMA_8B, n, link), rel=1e-9
            )
    # loading the prefix, then computing the suffix, against computing everything
    assert ttft(LLAMA_8B, 8256, 8192, HOST_LINK) < ttft(LLAMA_8B, 8256, 8192, None)


def test_the_quick_benchmark_runs_as_documented(capsys: pytest.CaptureFixture[str]) -> None:
    argv = sys.argv
    sys.argv = [str(SCRIPT), "--quick"]  # python benchmarks/bench_offload.py --quick
    try:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    finally:
        sys.argv = argv
    text = capsys.readouterr().out
    assert text.count("16 blocks loaded") == 3  # the 256-token prefix came back from each tier
    assert text.count("ratio recompute /") == 3
    assert "32,768" in text
