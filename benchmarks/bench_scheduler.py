"""Scheduler decode-step throughput at 256, 2k and 8k running sequences, against nano-vllm's.

Every sequence is admitted up front into a pool large enough that nobody is preempted; then
decode steps are timed one by one, each as the engine sees it: the scheduling call plus
appending one sampled (dummy) token to every scheduled sequence. The fastest step counts
(this machine is shared and noisy), timed in process CPU time, with the garbage collector
collected before and off while timed, as in ``timeit``; ``--rounds`` (default 3) repeats
every row in interleaved rounds and keeps each cell's best. A collection before every step
walks every object of the process (torch's too, where nano-vllm's imports load it) and leaves
the caches cold for the step; ``--collect once`` collects once before a row's timed steps
instead, and keeps the collector off while each step is timed, for every row alike. Rows:

* ``Scheduler`` over ``BlockManager`` and over ``PrefixCachingBlockManager`` (SHA-256 and
  builtin hash): the reference;
* ``peer: nano-vllm Scheduler``: ``nanovllm.engine.scheduler.Scheduler`` from the PyPI release
  ``nano-vllm-fork``, with its own prefix-caching ``BlockManager`` (xxhash64): ``schedule()``
  then ``postprocess()``. It runs in the peers' environment (``make bench-peers``). Its
  config module needs transformers' ``AutoConfig`` only to read a model directory; the
  scheduler reads five numbers from the config, which are passed as a plain namespace. This
  release's decode loop takes ``temp_running.pop(0)`` per sequence, so its step is quadratic
  in the running count;
* ``textbook loop``: the loop shape of the course text, rewritten here: iterate over a copy of
  ``running`` and re-check ``seq in running`` before each append, O(n^2) per step. It is
  not a scheduler anyone runs; it shows what the O(1) decode loop avoids.

vLLM's v1 ``Scheduler`` is not driven: its constructor needs a full ``VllmConfig`` (a model's
config, a ``KVCacheConfig``, the structured-output manager), which is more engine than a
block-level comparison should carry.

Figures: decode tokens/s per row and size, each row's largest / smallest size (flatness,
target >= 0.8 for ours), and ours over each peer at each size. Run:
``python benchmarks/bench_scheduler.py [--quick]``, or ``make bench-peers`` for the nano-vllm
row.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import platform
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "src"))  # after PYTHONPATH: make bench-peers-compiled
sys.path.insert(0, str(HERE))

from bench_blocks import PEERS_PYTHON, load_nanovllm  # noqa: E402

from servelab.kv.blocks import BlockManager, OutOfBlocks  # noqa: E402
from servelab.kv.prefix import PrefixCachingBlockManager  # noqa: E402
from servelab.kv.scheduler import KVCacheManager, Scheduler, Sequence  # noqa: E402
from servelab.kv.sim import emit_tokens  # noqa: E402
from servelab.native import describe  # noqa: E402

BLOCK = 16
PROMPT = 20
SIZES = (256, 2_048, 8_192)


COLLECT_EACH_STEP = True  # ``--collect once`` sets it False


@contextmanager
def _no_gc() -> Iterator[None]:
    """Time without the cyclic garbage collector, as ``timeit`` does (collected first, before
    every step, unless ``--collect once``)."""
    if COLLECT_EACH_STEP:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _num_blocks(n: int, steps: int) -> int:
    return n * (-(-(PROMPT + steps + 4) // BLOCK)) + 8


def ours(make_bm: Callable[[int], KVCacheManager]) -> Callable[[int, int], float]:
    def run(n: int, steps: int) -> float:
        sched = Scheduler(make_bm(_num_blocks(n, steps)), watermark=0)
        for i in range(n):
            sched.add(Sequence.dummy(i, PROMPT, steps + 4))  # none finishes
        emit_tokens(sched.step())  # admission: prefill everyone
        best = float("inf")
        gc.collect()
        for _ in range(steps):
            with _no_gc():
                t0 = time.process_time()
                out = sched.step()
                emit_tokens(out)
                best = min(best, time.process_time() - t0)
            assert not out.prefills and len(out.computed()) == n  # all decoded, none admitted
        return n / best

    return run


def nano_vllm(n: int, steps: int) -> float:
    load_nanovllm()
    if "nanovllm.config" not in sys.modules:
        importlib.import_module("nanovllm.config")
    sched_mod = importlib.import_module("nanovllm.engine.scheduler")
    _, seq_mod = load_nanovllm()
    config = types.SimpleNamespace(
        max_num_seqs=n,
        max_num_batched_tokens=n * PROMPT,
        eos=-1,
        num_kvcache_blocks=_num_blocks(n, steps),
        kvcache_block_size=BLOCK,
    )
    sched = sched_mod.Scheduler(config)
    params = importlib.import_module("nanovllm.sampling_params").SamplingParams(
        max_tokens=steps + 4, ignore_eos=True
    )
    for i in range(n):
        sched.add(seq_mod.Sequence([i] * PROMPT, params))
    seqs, is_prefill = sched.schedule()
    assert is_prefill and len(seqs) == n
    sched.postprocess(seqs, [0] * n)
    best = float("inf")
    gc.collect()
    for _ in range(steps):
        with _no_gc():
            t0 = time.process_time()
            seqs, is_prefill = sched.schedule()
            sched.postprocess(seqs, [0] * len(seqs))
            best = min(best, time.process_time() - t0)
        assert not is_prefill and len(seqs) == n
    return n / best


class TextbookLoop:
    """The course text's decode loop, with an O(n) membership test per sequence."""

    def __init__(self, bm: BlockManager, seqs: list[Sequence]) -> None:
        self.bm = bm
        self.running = list(seqs)
        for seq in seqs:
            bm.allocate(seq.seq_id, seq.num_tokens)

    def step(self) -> list[Sequence]:
        decoded = []
        for seq in list(self.running):
            while seq in self.running:
                try:
                    self.bm.append_slot(seq.seq_id)
                except OutOfBlocks:
                    self.bm.free_seq(self.running.pop().seq_id)
                    continue
                decoded.append(seq)
                break
        return decoded


def textbook(n: int, steps: int) -> float:
    seqs = [Sequence.dummy(i, PROMPT, steps + 4) for i in range(n)]
    loop = TextbookLoop(BlockManager(_num_blocks(n, steps), BLOCK), seqs)
    best = float("inf")
    gc.collect()
    for _ in range(steps):
        with _no_gc():
            t0 = time.process_time()
            decoded = loop.step()
            for seq in decoded:
                seq.append_token(0)
            best = min(best, time.process_time() - t0)
        assert len(decoded) == n
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (CI smoke run)")
    parser.add_argument("--no-peers", action="store_true", help="skip nano-vllm")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds over every row (best kept per cell)"
    )
    parser.add_argument(
        "--collect",
        choices=("step", "once"),
        default="step",
        help="run the garbage collector before every timed step (default) or once per row",
    )
    args = parser.parse_args()
    global COLLECT_EACH_STEP
    COLLECT_EACH_STEP = args.collect == "step"
    try:
        load_nanovllm()
        importlib.import_module("nanovllm.engine.scheduler")
        why_not = None
    except Exception as exc:  # any import failure means: no peer in this interpreter
        why_not = f"{type(exc).__name__}: {exc}"
    if (
        why_not
        and not args.no_peers
        and PEERS_PYTHON.exists()
        and sys.executable != str(PEERS_PYTHON)
    ):
        os.execv(str(PEERS_PYTHON), [str(PEERS_PYTHON), __file__, *sys.argv[1:]])
    steps, rounds = (2, 1) if args.quick else (6, max(1, args.rounds))
    rows: dict[str, Callable[[int, int], float]] = {
        "Scheduler + BlockManager": ours(lambda b: BlockManager(b, BLOCK)),
        "Scheduler + PrefixCaching sha256": ours(lambda b: PrefixCachingBlockManager(b, BLOCK)),
        "Scheduler + PrefixCaching builtin": ours(
            lambda b: PrefixCachingBlockManager(b, BLOCK, hash_algo="builtin")
        ),
        "textbook loop (not a real scheduler)": textbook,
    }
    if why_not is None and not args.no_peers:
        rows["peer: nano-vllm Scheduler"] = nano_vllm
    print(
        f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"servelab {describe()}; garbage collected "
        + ("before every timed step" if COLLECT_EACH_STEP else "once per row, not per step")
    )
    if why_not and not args.no_peers:
        print(f"# nano-vllm not measured ({why_not}); run `make bench-peers`")
    print(f"{'decode tokens/s':38s}" + "".join(f"{n:>12,d}" for n in SIZES) + f"{'flat':>7}")
    # Rounds interleave the rows (each round in a rotated order), so a slow spell of this
    # shared machine lands on every row alike; each cell keeps its best round.
    results = {name: [0.0] * len(SIZES) for name in rows}
    names = list(rows)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            for i, n in enumerate(SIZES):
                results[name][i] = max(results[name][i], rows[name](n, steps))
    for name in rows:
        cells = "".join(f"{r:12,.0f}" for r in results[name])
        print(f"{name:38s}{cells}{results[name][-1] / results[name][0]:7.2f}")
    peers = [name for name in rows if name.startswith(("peer", "textbook"))]
    for mine in [name for name in rows if name.startswith("Scheduler")]:
        for peer in peers:
            ratios = ", ".join(
                f"{a / b:.2f}x at {n:,}"
                for n, a, b in zip(SIZES, results[mine], results[peer], strict=True)
            )
            print(f"{mine} / {peer}: {ratios}")


if __name__ == "__main__":
    main()
