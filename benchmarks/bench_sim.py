"""Simulator throughput: requests replayed per second, per policy, beside libcachesim.

libcachesim (C, one Python call per request here) is the peer: our replay is pure Python, so
the interesting figure is how far from it we are and whether a notebook-sized replay (a few
hundred thousand requests) takes seconds. Run: ``python benchmarks/bench_sim.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from servelab.weights.policies import POLICIES
from servelab.weights.sim import (
    GB,
    PolicyNode,
    SimResult,
    belady,
    fleet,
    model_catalogue,
    replay,
    replay_libcachesim,
    simulate_fleet,
    zipf_trace,
)


def timed(fn: Callable[[], SimResult]) -> tuple[float, SimResult]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller trace (a smoke test)")
    args = parser.parse_args()
    n = 50_000 if args.quick else 500_000
    models = model_catalogue(60, seed=0)
    trace = zipf_trace(models, n, alpha=0.9, seed=0)
    capacity = 500 * GB
    rows: list[tuple[str, float, SimResult]] = []
    for name, make in POLICIES.items():
        seconds, result = timed(
            lambda make=make: replay(trace, PolicyNode(capacity, make()), progress=False)
        )
        rows.append((f"ours {name}", seconds, result))
    for size_aware in (False, True):
        seconds, result = timed(
            lambda s=size_aware: belady(trace, capacity, size_aware=s, progress=False)
        )
        rows.append((f"ours {result.name}", seconds, result))
    for router in ("random", "affinity"):
        seconds, result = timed(
            lambda r=router: simulate_fleet(
                trace, fleet(8, 200 * GB, POLICIES["LRU"]), router=r, progress=False
            )
        )
        rows.append((f"ours 8 x 200 GB, {router}", seconds, result))
    try:
        for algorithm in ("LRU", "Sieve", "S3FIFO", "GDSF", "BeladySize"):
            seconds, result = timed(lambda a=algorithm: replay_libcachesim(trace, capacity, a))
            rows.append((f"libcachesim {algorithm}", seconds, result))
    except ImportError:
        print("(libcachesim not installed: peer rows skipped)")

    print(f"\n{n:,} requests over {len(models)} models (1-140 GB), a {capacity // GB} GB node")
    header = f"{'replay':<30} {'requests/s':>12} {'object miss':>12} {'byte miss':>10}"
    print(header)
    print("-" * len(header))
    for label, seconds, result in rows:
        print(
            f"{label:<30} {n / seconds:>12,.0f} {result.object_miss_ratio:>12.3f} "
            f"{result.byte_miss_ratio:>10.3f}"
        )


if __name__ == "__main__":
    main()
