"""WeightCache against cachetools.LRUCache, and the cost of pins.

Prints two tables:

1. ops/s on a hit-heavy and a miss-heavy trace for ``cachetools.LRUCache(maxsize,
   getsizeof=...)`` (byte budget; no pins, no stats, one policy, not thread-safe) and for our
   ``WeightCache`` (byte budget, counted pins, stats, any policy, one lock per call), and their
   ratio. An op is one request: ``get``, and ``put`` on a miss. Target: ratio >= 1.0 for our
   cache with the peer's policy, LRU. cachetools used as threads would have to use it, under a
   ``threading.Lock``, is printed too; the other policies show what their own logic costs.
2. the cost of a ``put`` that evicts, with 0% and 90% of the resident entries pinned. Pinned
   entries are kept out of the policy's candidates, so the target is a ratio <= 1.5.
3. an uncontended acquire/release pair of ``threading.Lock`` and of the cache's ``TokenLock``
   (taken inline, as ``get`` and ``put`` take it): why the cache has its own lock.

Each figure is the best of ``--repeat`` runs, the peers interleaved in the same process.
Run: ``python benchmarks/bench_weight_cache.py [--quick]``.
"""

from __future__ import annotations

import argparse
import random
import threading
import time

import cachetools

from servelab.weights.cache import WeightCache
from servelab.weights.lock import TokenLock
from servelab.weights.policies import POLICIES

Trace = list[tuple[int, int]]  # (key, size)


def make_trace(n_keys: int, n_ops: int, alpha: float, seed: int) -> Trace:
    rng = random.Random(seed)
    sizes = [rng.choice((1, 2, 4, 8, 14, 16, 26, 64, 140)) for _ in range(n_keys)]
    weights = [1 / (r + 1) ** alpha for r in range(n_keys)]
    keys = rng.choices(range(n_keys), weights=weights, k=n_ops)
    return [(k, sizes[k]) for k in keys]


def run_cachetools(trace: Trace, capacity: int) -> tuple[float, int]:
    cache: cachetools.LRUCache[int, tuple[int, int]] = cachetools.LRUCache(
        capacity, getsizeof=lambda v: v[1]
    )
    get = cache.get
    hits = 0
    start = time.perf_counter()
    for key, size in trace:
        if get(key) is None:
            cache[key] = (key, size)
        else:
            hits += 1
    return time.perf_counter() - start, hits


def run_cachetools_locked(trace: Trace, capacity: int) -> tuple[float, int]:
    """cachetools as a replica thread would have to use it: every access under one lock."""
    cache: cachetools.LRUCache[int, tuple[int, int]] = cachetools.LRUCache(
        capacity, getsizeof=lambda v: v[1]
    )
    get = cache.get
    lock = threading.Lock()
    acquire, release = lock.acquire, lock.release  # the cheapest way to hold a lock, as ours does
    hits = 0
    start = time.perf_counter()
    for key, size in trace:
        acquire()
        try:
            found = get(key)
        finally:
            release()
        if found is None:
            acquire()
            try:
                cache[key] = (key, size)
            finally:
                release()
        else:
            hits += 1
    return time.perf_counter() - start, hits


def run_weight_cache(trace: Trace, capacity: int, policy: str) -> tuple[float, int]:
    cache: WeightCache[int] = WeightCache(capacity, policy=POLICIES[policy]())
    get, put = cache.get, cache.put
    hits = 0
    start = time.perf_counter()
    for key, size in trace:
        if get(key) is None:
            put(key, (key, size), size)
        else:
            hits += 1
    return time.perf_counter() - start, hits


def compare_with_cachetools(n_ops: int, repeat: int) -> None:
    workloads = {
        # 2,000 models, a budget that holds most of the popular ones: ~90% hits
        "hit-heavy": (make_trace(2_000, n_ops, 1.1, seed=1), 30_000),
        # 20,000 models, uniform popularity, a small budget: ~90% misses
        "miss-heavy": (make_trace(20_000, n_ops, 0.0, seed=2), 60_000),
    }
    print(f"\nops/s, one op = get (+ put on a miss); {n_ops:,} ops, best of {repeat}")
    print("ratio = our ops/s ÷ bare cachetools' (target >= 1.0 for LRU); vs+lock = ÷ cachetools")
    print("under a threading.Lock, as threads would have to use it (WeightCache locks itself).")
    header = (
        f"{'trace':<11} {'hit %':>6} {'cachetools':>11} {'+lock':>10} {'ours':>10} "
        f"{'policy':>7} {'ratio':>6} {'vs+lock':>8}"
    )
    print(header)
    print("-" * len(header))
    for label, (trace, capacity) in workloads.items():
        for policy in ("LRU", "FIFO", "SIEVE", "LFU"):
            # interleave the three runs so a change in machine load hits all of them alike
            base_t = locked_t = ours_t = float("inf")
            for _ in range(repeat):
                t, base_hits = run_cachetools(trace, capacity)
                base_t = min(base_t, t)
                locked_t = min(locked_t, run_cachetools_locked(trace, capacity)[0])
                t, ours_hits = run_weight_cache(trace, capacity, policy)
                ours_t = min(ours_t, t)
            if policy == "LRU" and ours_hits != base_hits:
                raise SystemExit(f"LRU disagrees with cachetools: {ours_hits} vs {base_hits} hits")
            print(
                f"{label:<11} {100 * ours_hits / len(trace):>5.1f}% {len(trace) / base_t:>11,.0f} "
                f"{len(trace) / locked_t:>10,.0f} {len(trace) / ours_t:>10,.0f} {policy:>7} "
                f"{base_t / ours_t:>6.2f} {locked_t / ours_t:>8.2f}"
            )


def put_cost(n_entries: int, pinned_fraction: float, n_puts: int, policy: str) -> float:
    """Seconds per evicting put with ``pinned_fraction`` of ``n_entries`` pinned."""
    cache: WeightCache[int] = WeightCache(n_entries, policy=POLICIES[policy]())
    for key in range(n_entries):
        cache.put(key, None, 1)
    n_pinned = int(n_entries * pinned_fraction)
    for key in range(n_pinned):  # the oldest entries: a scan from the front meets them first
        cache.pin(key)
    put = cache.put
    # One untimed put: steady state. A policy may move each pinned entry aside once, on the
    # first eviction that meets it; that is a cost of the pin (O(1) per pin), not of every put.
    put(-1, None, 1)
    start = time.perf_counter()
    for key in range(n_entries, n_entries + n_puts):
        put(key, None, 1)  # the cache is full: every put evicts one unpinned entry
    return (time.perf_counter() - start) / n_puts


def compare_pinned(n_entries: int, n_puts: int, repeat: int) -> None:
    print(f"\nper-put cost (each put evicts), {n_entries:,} entries, best of {repeat}")
    header = f"{'policy':<8} {'0% pinned':>12} {'90% pinned':>12} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for policy in POLICIES:
        free = held = float("inf")
        for _ in range(repeat):  # interleaved, as above
            free = min(free, put_cost(n_entries, 0.0, n_puts, policy))
            held = min(held, put_cost(n_entries, 0.9, n_puts, policy))
        print(f"{policy:<8} {free * 1e6:>10.2f}µs {held * 1e6:>10.2f}µs {held / free:>6.2f}")


def lock_pair_ns(n: int, repeat: int) -> tuple[float, float]:
    """Nanoseconds per uncontended acquire/release: threading.Lock, then TokenLock inline."""
    lock = threading.Lock()
    token = TokenLock().token
    best_lock = best_token = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            lock.acquire()
            lock.release()
        best_lock = min(best_lock, time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(n):
            try:
                token.pop()
            except IndexError:  # pragma: no cover - uncontended here
                pass
            token.append(None)
        best_token = min(best_token, time.perf_counter() - start)
    return best_lock / n * 1e9, best_token / n * 1e9


def compare_locks(n: int, repeat: int) -> None:
    lock_ns, token_ns = lock_pair_ns(n, repeat)
    print(f"\nuncontended acquire + release, best of {repeat} × {n:,}")
    print(f"threading.Lock  {lock_ns:6.1f} ns")
    print(f"TokenLock       {token_ns:6.1f} ns   ratio {lock_ns / token_ns:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n_ops = 50_000 if args.quick else 300_000
    compare_with_cachetools(n_ops, args.repeat)
    n_entries = 10_000 if args.quick else 100_000
    compare_pinned(n_entries, 20_000 if args.quick else 100_000, args.repeat)
    compare_locks(100_000 if args.quick else 1_000_000, args.repeat)


if __name__ == "__main__":
    main()
