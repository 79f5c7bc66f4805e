"""The simulator benchmark times every row alike: CPU time, the best of its runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_sim

from servelab.weights.policies import POLICIES
from servelab.weights.sim import GB, PolicyNode, model_catalogue, replay, zipf_trace


def test_timed_keeps_the_best_cpu_time_of_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPU clock readings: runs of 5, 2 and 4 seconds; a wall clock would not be read at all
    readings = iter([10.0, 15.0, 20.0, 22.0, 30.0, 34.0])
    monkeypatch.setattr(bench_sim.time, "process_time", lambda: next(readings))
    monkeypatch.setattr(bench_sim.time, "perf_counter", lambda: pytest.fail("wall clock read"))
    models = model_catalogue(5, seed=0)
    trace = zipf_trace(models, 200, alpha=0.9, seed=0)
    nodes: list[PolicyNode] = []

    def run() -> bench_sim.SimResult:
        nodes.append(PolicyNode(100 * GB, POLICIES["LRU"]()))
        return replay(trace, nodes[-1], progress=False)

    seconds, result = bench_sim.timed(run, 3)
    assert seconds == 2.0
    assert len(nodes) == 3 and len({id(node) for node in nodes}) == 3  # a fresh node per run
    assert result == replay(trace, PolicyNode(100 * GB, POLICIES["LRU"]()), progress=False)


def test_quick_run_prints_every_policy_timed_in_cpu_time(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_sim.py", "--quick", "--repeat", "1"])
    bench_sim.main()
    out = capsys.readouterr().out
    assert "CPU time (process_time), best of 1\n" in out
    for name in POLICIES:
        assert f"ours {name} " in out
