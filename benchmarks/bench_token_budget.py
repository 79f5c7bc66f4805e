"""The token budget's trade-off on the simulator: TTFT and ITL (p50, p99) and preemptions.

One Poisson workload, one pool, one cost model (``servelab.kv.latency.CostModel``: a fixed cost
per step plus a cost per computed token, stated in the header), served by the v0-style
scheduler (whole-prompt admission by a 1% watermark, one decode token per sequence) and by the
token-budget scheduler at several budgets and watermarks. Every figure is modelled time, so the
table is the same on every machine and every run. Run: ``python benchmarks/bench_token_budget.py
[--quick]``.
"""

from __future__ import annotations

import argparse

from servelab.kv.blocks import BlockManager
from servelab.kv.budget import TokenBudgetScheduler
from servelab.kv.latency import CostModel, LatencyResult, poisson_workload, simulate_latency
from servelab.kv.scheduler import Scheduler


def sweep(n: int, num_blocks: int, rate: float, cost: CostModel) -> None:
    block_size = 16
    work = poisson_workload(
        n, seed=0, rate_per_s=rate, prompt_len=(64, 2048), max_new_tokens=(16, 256)
    )
    print(
        f"\n{n} requests, Poisson {rate}/s, prompts 64-2048, outputs 16-256 tokens; "
        f"{num_blocks} blocks of {block_size} ({num_blocks * block_size} tokens), plain "
        f"block manager; step cost {cost.step_ms} ms + {cost.token_ms} ms per computed token"
    )
    rows: list[tuple[str, LatencyResult]] = []
    v0 = Scheduler(BlockManager(num_blocks, block_size))
    rows.append(("v0 (watermark 1%)", simulate_latency(v0, work, cost)))
    for budget in (64, 128, 256, 512, 1024, 2048, 8192):
        sched = TokenBudgetScheduler(
            BlockManager(num_blocks, block_size), max_num_batched_tokens=budget
        )
        rows.append((f"budget {budget}", simulate_latency(sched, work, cost)))
    for watermark in (0.02, 0.05, 0.10):
        sched = TokenBudgetScheduler(
            BlockManager(num_blocks, block_size), max_num_batched_tokens=512, watermark=watermark
        )
        rows.append((f"budget 512, watermark {watermark:.2f}", simulate_latency(sched, work, cost)))
    print(
        f"{'scheduler':<28} {'TTFT p50':>9} {'TTFT p99':>9} {'ITL p50':>8} {'ITL p99':>8} "
        f"{'preempt':>8} {'steps':>7} {'makespan':>9}"
    )
    print(f"{'':<28} {'(ms)':>9} {'(ms)':>9} {'(ms)':>8} {'(ms)':>8} {'':>8} {'':>7} {'(s)':>9}")
    for name, res in rows:
        r = res.row()
        assert res.leaked_blocks == 0 and len(res.ttft_ms) == n
        print(
            f"{name:<28} {r['ttft_p50']:>9.0f} {r['ttft_p99']:>9.0f} {r['itl_p50']:>8.1f} "
            f"{r['itl_p99']:>8.1f} {res.preemptions:>8} {res.steps:>7} {r['makespan_s']:>9.1f}"
        )


# vLLM PR #44594's table (Qwen2.5-7B-Instruct, one GB200, 450 requests at 128 concurrent):
# watermark -> preemptions, TTFT p50 (s), ITL p99 (ms)
PR_44594 = {
    0.0: (1065, 6.56, 40.62),
    0.02: (400, 11.80, 18.80),
    0.05: (187, 11.20, 17.70),
    0.10: (168, 8.96, 17.57),
}


def beside_pr_44594(n: int, num_blocks: int, rate: float, cost: CostModel) -> None:
    """The watermark's effect here, relative to none, beside the PR's measured one."""
    work = poisson_workload(
        n, seed=0, rate_per_s=rate, prompt_len=(64, 2048), max_new_tokens=(16, 256)
    )
    print(f"\nwatermark beside vLLM PR #44594 (budget 512, {num_blocks} blocks of 16)")
    print(
        f"{'watermark':>9} | {'PR: preempt':>11} {'(rel)':>6} {'TTFT p50':>9} {'ITL p99':>8} | "
        f"{'here':>6} {'(rel)':>6} {'TTFT p50':>9} {'ITL p99':>8}"
    )
    base_pr, base = PR_44594[0.0][0], 0
    for watermark, (pr, pr_ttft, pr_itl) in PR_44594.items():
        sched = TokenBudgetScheduler(
            BlockManager(num_blocks, 16), max_num_batched_tokens=512, watermark=watermark
        )
        res = simulate_latency(sched, work, cost)
        row, here = res.row(), res.preemptions
        base = base or here
        print(
            f"{watermark:>9.2f} | {pr:>11} {pr / base_pr:>6.2f} {pr_ttft:>7.2f} s {pr_itl:>5.1f} ms"
            f" | {here:>6} {here / max(base, 1):>6.2f} {row['ttft_p50'] / 1000:>7.2f} s "
            f"{row['itl_p99']:>5.1f} ms"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller workload")
    args = parser.parse_args()
    n = 40 if args.quick else 100
    cost = CostModel()
    sweep(n, 1000, 3.0, cost)  # room for everyone: the budget trades TTFT against ITL
    sweep(n, 400, 3.0, cost)  # a tight pool: admitting by the first chunk preempts
    beside_pr_44594(n, 400, 3.0, cost)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
