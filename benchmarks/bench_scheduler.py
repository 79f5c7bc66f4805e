"""Scheduler decode-step throughput at 256, 2k and 8k running sequences: does it stay flat?

Every sequence is admitted up front into a pool large enough that nobody is preempted, then a few
decode steps are timed one by one (``step()`` only, not the dummy token appends between steps)
and the fastest counts, since this machine is shared and noisy. The garbage collector is off while
a step is timed, as in ``timeit``.
Rows:

* ``Scheduler``: the reference; the decode loop walks ``running`` by index, O(1) per sequence;
* ``peer: membership scan``: a minimal re-implementation, written here for the comparison, of
  the loop shape in the seed text: iterate over a copy of ``running`` and re-check ``seq in
  running`` before each append, which scans the list, so a step costs O(n^2).

Figures: decode tokens/s per row and size, ours at the largest size over ours at the smallest
(flatness, target >= 0.8), and ours over the peer at each size. Run:
``python benchmarks/bench_scheduler.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from servelab.kv.blocks import BlockManager, OutOfBlocks
from servelab.kv.scheduler import Scheduler, Sequence
from servelab.kv.sim import emit_tokens

BLOCK = 16
PROMPT = 20
SIZES = (256, 2_048, 8_192)


class ScanningPeer:
    """The decode loop with an O(n) membership test per sequence (no admission, no retirement)."""

    def __init__(self, bm: BlockManager, seqs: list[Sequence]) -> None:
        self.bm = bm
        self.running = list(seqs)
        for seq in seqs:
            bm.allocate(seq.seq_id, seq.num_tokens)

    def step(self) -> int:
        decoded = 0
        for seq in list(self.running):
            while seq in self.running:
                try:
                    self.bm.append_slot(seq.seq_id)
                except OutOfBlocks:
                    self.bm.free_seq(self.running.pop().seq_id)
                    continue
                decoded += 1
                break
        return decoded


def _sequences(n: int, steps: int) -> list[Sequence]:
    return [Sequence.dummy(i, PROMPT, steps + 4) for i in range(n)]  # none finishes


def _pool(n: int, steps: int) -> BlockManager:
    return BlockManager(n * (-(-(PROMPT + steps + 4) // BLOCK)) + 8, BLOCK)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Time without the cyclic garbage collector, as ``timeit`` does: a full collection scans
    every live object, which would charge the step for the size of the whole heap."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def ours(n: int, steps: int) -> float:
    sched = Scheduler(_pool(n, steps), watermark=0)
    for seq in _sequences(n, steps):
        sched.add(seq)
    emit_tokens(sched.step())  # admission: prefill everyone
    best = float("inf")
    for _ in range(steps):
        with _no_gc():
            t0 = time.perf_counter()
            out = sched.step()
            best = min(best, time.perf_counter() - t0)
        assert len(out.decodes) == n
        emit_tokens(out)
    return n / best


def peer(n: int, steps: int) -> float:
    scheduler = ScanningPeer(_pool(n, steps), _sequences(n, steps))
    best = float("inf")
    for _ in range(steps):
        with _no_gc():
            t0 = time.perf_counter()
            decoded = scheduler.step()
            best = min(best, time.perf_counter() - t0)
        assert decoded == n
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (CI smoke run)")
    args = parser.parse_args()
    steps = 2 if args.quick else 6
    rows: dict[str, Callable[[int, int], float]] = {
        "Scheduler": ours,
        "peer: membership scan": peer,
    }
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"{'decode tokens/s':24s}" + "".join(f"{n:>14,d}" for n in SIZES))
    results: dict[str, list[float]] = {}
    for name, run in rows.items():
        results[name] = [run(n, steps) for n in SIZES]
        print(f"{name:24s}" + "".join(f"{r:14,.0f}" for r in results[name]))
    mine, theirs = results["Scheduler"], results["peer: membership scan"]
    print(f"flatness, ours at {SIZES[-1]:,} / at {SIZES[0]:,}: {mine[-1] / mine[0]:.2f}")
    print(
        "ours / peer: "
        + ", ".join(f"{a / b:.1f}x at {n:,}" for n, a, b in zip(SIZES, mine, theirs, strict=True))
    )


if __name__ == "__main__":
    main()
