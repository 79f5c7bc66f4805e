"""Simulator throughput: requests replayed per second, per policy, against libcachesim's C loop.

The speed anchor is libcachesim's own trace loop (``cache.process_trace(reader)``, all in C):
the trace is written once as an ``oracleGeneral`` binary file and replayed by each algorithm
without a Python call per request. Our replay is pure Python, so the ratio says how far a
notebook-sized replay is from a C simulator; the miss ratios say whether the two agree.

Where they do not, the reason is known (see docs/PERFORMANCE.md): libcachesim's S3FIFO never
admits an object larger than its small queue (10% of the cache), so every request for a model
above 50 GB on a 500 GB node is a miss there; a weight cache must admit every model it serves.
Every row is timed alike, ours and libcachesim's: process CPU time (``time.process_time``), the
best of ``--repeat`` runs (default 3), each of our replays on a fresh node. On this shared
machine a wall clock reads whatever the other jobs take; the CPU time of the best run does not.
Run: ``python benchmarks/bench_sim.py [--quick] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from servelab.native import describe
from servelab.weights.policies import POLICIES
from servelab.weights.sim import (
    GB,
    Model,
    PolicyNode,
    SimResult,
    belady,
    fleet,
    model_catalogue,
    replay,
    simulate_fleet,
    zipf_trace,
)

MB = 10**6
# libcachesim's oracleGeneral record: clock time, object id, size, next access (little endian)
_RECORD = struct.Struct("<IQIq")


def timed(fn: Callable[[], SimResult], repeat: int) -> tuple[float, SimResult]:
    """The best CPU seconds of ``repeat`` calls of ``fn`` (each builds its own node), and the
    last call's result (every call replays the same trace, so they are equal)."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        best = min(best, time.process_time() - start)
    assert result is not None
    return best, result


def write_oracle_trace(trace: Sequence[Model], path: Path) -> None:
    """The trace as an oracleGeneral file; sizes in MB (exact here), which fit its 32 bits."""
    ids: dict[str, int] = {}
    with open(path, "wb") as f:
        for model in trace:
            if model.size % MB:
                raise ValueError(f"{model.name}: size {model.size} is not a whole number of MB")
            obj = ids.setdefault(model.name, len(ids) + 1)
            f.write(_RECORD.pack(0, obj, model.size // MB, -1))


def libcachesim_c_loop(
    path: Path, capacity: int, algorithm: str, repeat: int
) -> tuple[float, float, float]:
    """Best CPU seconds of ``repeat`` runs, object and byte miss ratios of libcachesim's C
    loop (the reader is opened before the clock starts, as our trace is built before)."""
    import libcachesim as lcs

    best = float("inf")
    ratios = (0.0, 0.0)
    for _ in range(repeat):
        cache = getattr(lcs, algorithm)(cache_size=capacity // MB)
        reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
        start = time.process_time()
        ratios = cache.process_trace(reader)
        best = min(best, time.process_time() - start)
    return best, ratios[0], ratios[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller trace (a smoke test)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row, the best kept")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    n = 50_000 if args.quick else 500_000
    repeat = args.repeat
    models = model_catalogue(60, seed=0)
    trace = zipf_trace(models, n, alpha=0.9, seed=0)
    capacity = 500 * GB
    rows: list[tuple[str, float, float, float]] = []  # label, seconds, object, byte miss

    def ours(label: str, fn: Callable[[], SimResult]) -> None:
        seconds, result = timed(fn, repeat)
        rows.append((label, seconds, result.object_miss_ratio, result.byte_miss_ratio))

    for name, make in POLICIES.items():
        ours(
            f"ours {name}",
            lambda make=make: replay(trace, PolicyNode(capacity, make()), progress=False),
        )
    for size_aware in (False, True):
        label = "ours Belady-size (offline)" if size_aware else "ours Belady (offline)"
        ours(label, lambda s=size_aware: belady(trace, capacity, size_aware=s, progress=False))
    for router in ("random", "affinity"):
        ours(
            f"ours 8 x 200 GB, {router}",
            lambda r=router: simulate_fleet(
                trace, fleet(8, 200 * GB, POLICIES["LRU"]), router=r, progress=False
            ),
        )
    anchor = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.oracleGeneral"
            write_oracle_trace(trace, path)
            for algorithm in ("LRU", "FIFO", "Sieve", "S3FIFO", "GDSF"):
                seconds, omr, bmr = libcachesim_c_loop(path, capacity, algorithm, repeat)
                rows.append((f"libcachesim {algorithm} (C loop)", seconds, omr, bmr))
                if algorithm == "LRU":
                    anchor = seconds
    except ImportError:
        print("(libcachesim not installed: peer rows skipped)")

    print(f"\n{n:,} requests over {len(models)} models (1-140 GB), a {capacity // GB} GB node")
    print("speed = requests/s ÷ libcachesim LRU's C loop (process_trace), the anchor")
    print(f"every rate: CPU time (process_time), best of {repeat}")
    print(f"servelab {describe()}")
    header = f"{'replay':<34} {'requests/s':>12} {'speed':>7} {'object miss':>12} {'byte miss':>10}"
    print(header)
    print("-" * len(header))
    for label, seconds, omr, bmr in rows:
        speed = f"{anchor / seconds:>7.3f}" if anchor else f"{'-':>7}"
        print(f"{label:<34} {n / seconds:>12,.0f} {speed} {omr:>12.3f} {bmr:>10.3f}")


if __name__ == "__main__":
    main()
