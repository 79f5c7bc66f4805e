"""TTFT and ITL on the modelled clock, for both schedulers."""

from __future__ import annotations

import math

import pytest

from servelab.kv.blocks import BlockManager
from servelab.kv.budget import TokenBudgetScheduler
from servelab.kv.latency import (
    CostModel,
    TimedArrival,
    percentile,
    poisson_workload,
    simulate_latency,
)
from servelab.kv.scheduler import Scheduler

COST = CostModel(step_ms=1.0, token_ms=1.0)
ONE = [TimedArrival(0.0, prompt_len=4, max_new_tokens=3)]


def test_chunked_prefill_delays_the_first_token_by_the_chunks() -> None:
    sched = TokenBudgetScheduler(BlockManager(8, 4), max_num_batched_tokens=2)
    res = simulate_latency(sched, ONE, COST)
    # steps of 2, 2 (samples), 1, 1 tokens: the first token at 3 + 3 ms, then gaps of 2 ms
    assert res.ttft_ms == [6.0] and res.itl_ms == [2.0, 2.0]
    assert (res.preemptions, res.leaked_blocks) == (0, 0)


def test_whole_prompt_prefill_samples_at_the_first_step() -> None:
    res = simulate_latency(Scheduler(BlockManager(8, 4), watermark=0), ONE, COST)
    assert res.ttft_ms == [5.0] and res.itl_ms == [2.0, 2.0]


def test_the_clock_waits_for_arrivals() -> None:
    late = [TimedArrival(100.0, prompt_len=4, max_new_tokens=1)]
    res = simulate_latency(TokenBudgetScheduler(BlockManager(8, 4)), late, COST)
    assert res.ttft_ms == [5.0] and res.makespan_ms >= 105.0


@pytest.mark.parametrize("budget", [None, 16, 256])
def test_every_request_gets_a_first_token_and_no_block_leaks(budget: int | None) -> None:
    work = poisson_workload(
        30, seed=1, rate_per_s=50.0, prompt_len=(8, 200), max_new_tokens=(1, 40)
    )
    bm = BlockManager(40, 8)
    sched = (
        Scheduler(bm) if budget is None else TokenBudgetScheduler(bm, max_num_batched_tokens=budget)
    )
    res = simulate_latency(sched, work)
    assert len(res.ttft_ms) == 30 and res.leaked_blocks == 0
    assert len(res.itl_ms) == sum(a.max_new_tokens - 1 for a in work)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))


def test_the_benchmark_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_token_budget.py"
    argv = sys.argv
    sys.argv = [str(script), "--quick"]
    try:
        with pytest.raises(SystemExit) as done:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert text.count("v0 (watermark 1%)") == 2 and "budget 512, watermark 0.10" in text
    assert "beside vLLM PR #44594" in text and "1065" in text
