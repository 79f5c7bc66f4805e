"""The scheduler benchmark runs in both collection modes and says which one it timed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_scheduler


@pytest.mark.parametrize(
    ("mode", "said"), [("step", "before every timed step"), ("once", "once per row")]
)
def test_a_quick_run_says_how_it_collected(
    mode: str, said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["bench_scheduler.py", "--quick", "--no-peers", "--rounds", "1", "--collect", mode]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(bench_scheduler, "COLLECT_EACH_STEP", True)
    bench_scheduler.main()
    out = capsys.readouterr().out
    assert f"garbage collected {said}" in out
    assert bench_scheduler.COLLECT_EACH_STEP is (mode == "step")
    assert "Scheduler + BlockManager" in out and "nano-vllm" not in out
