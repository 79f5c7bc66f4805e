"""benchmarks/gpu.py runs end to end at smoke sizes on the CPU and writes sane JSON."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"


def test_smoke_run_writes_every_section(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("servelab_gpu_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "gpu.json"
    assert module.main(["--smoke", "--device", "cpu", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(module.SECTIONS) <= set(result)
    assert result["meta"]["smoke"] is True
    assert result["copy"]["gbps"] > 0
    rows = result["attention"]["rows"]
    assert {r["backend"] for r in rows} == {"flex", "gather", "dense", "gather_overhead"}
    assert {r["block_size"] for r in rows} == {16, 64}
    assert all(isinstance(r["launch_bound"], bool) for r in rows if "gbps" in r)
    assert all(r["flex_max_abs_err_vs_dense"] < 1e-4 for r in rows if "share_of_oracle" in r)
    assert result["e2e"]["tokens_equal"] is True
    assert result["e2e"]["mismatches"] == 0 and result["e2e"]["near_ties"] == []
    step = result["decode_step"]
    assert step["mask_builds_per_step"] == 1.0
    assert step["syncs_per_step"] is None  # counted by tests/test_decode_step.py on a CPU
    assert step["prefill_backend_fresh_prompt"] in {"flash", "math"}
    assert result["host"]["pinned"] is False  # a CPU build never pins
    assert result["store"]["load_fraction_of_raw"] > 0
    assert result["recompute_vs_swap"]["recompute_us_per_token"] > 0


def test_full_sizes_refuse_to_run_without_a_gpu(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("servelab_gpu_benchmark2", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit):
        module.main(["--device", "cpu", "--out", str(tmp_path / "x.json")])
