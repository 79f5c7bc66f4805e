"""How diagnosis replays the programs of topic ``scheduler``: names, state, values, and the
programs that tell its known mistakes apart (:mod:`servelab.grading.diagnose`).

Apart from :mod:`servelab.grading.scheduler` only to keep each file short enough to read in
one sitting; the topic declares :data:`REPLAY` as its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from servelab.grading.block_manager import graded_blocks
from servelab.grading.observe import Canon, frozen, scheduler_fields
from servelab.grading.readings.scheduler import scheduler_reading
from servelab.grading.readings.scheduler_raised import index_past_running
from servelab.grading.replay import TopicReplay, plain, program
from servelab.kv.blocks import BlockManager
from servelab.kv.scheduler import Sequence
from servelab.kv.sim import emit_tokens

__all__ = ["REPLAY", "SEPARATING"]


def _scheduler_ns(impl: Any) -> dict[str, Any]:
    return {
        "Scheduler": impl,
        "BlockManager": BlockManager,
        "Sequence": Sequence,
        "emit_tokens": emit_tokens,
    }


def _scheduler_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    sched = ns.get("sched")
    if sched is None:
        return None

    out = ns.get("out")
    step: Hashable = None
    if out is not None:
        step = (
            tuple((p.seq.seq_id, p.num_tokens, getattr(p, "num_cached", 0)) for p in out.prefills),
            # a decode is its sequence and the slot it carries: a decode reported with
            # another slot differs at the call that wrote it
            tuple((d.seq.seq_id, _slot(d)) for d in out.decodes),
            tuple(s.seq_id for s in out.preempted),
            tuple(s.seq_id for s in out.finished),
        )
    fields = scheduler_fields(sched, canon)
    return (step, graded_blocks(fields) if "tables" in fields else frozen(fields))


def _slot(decode: Any) -> Hashable:
    slot = getattr(decode, "slot", None)
    return slot if isinstance(slot, tuple | int | None) else repr(slot)


def _steps(n: int) -> list[str]:
    return ["out = sched.step()", "emit_tokens(out)"] * n


SEPARATING = (
    program(
        "bm = BlockManager(num_blocks=4, block_size=2)",
        "sched = Scheduler(bm, watermark=1)",
        "sched.add(Sequence.dummy(0, prompt_len=2, max_new_tokens=2))",
        "sched.add(Sequence.dummy(1, prompt_len=1, max_new_tokens=3))",
        "sched.add(Sequence.dummy(2, prompt_len=3, max_new_tokens=1))",
        "sched.add(Sequence.dummy(3, prompt_len=4, max_new_tokens=2))",
        "sched.add(Sequence.dummy(4, prompt_len=6, max_new_tokens=1))",
        *_steps(8),
    ),
    program(
        "bm = BlockManager(num_blocks=3, block_size=1)",
        "sched = Scheduler(bm, watermark=0)",
        "sched.add(Sequence.dummy(0, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(1, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(2, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(3, prompt_len=5, max_new_tokens=1))",
        *_steps(6),
    ),
    program(  # too large with its tokens to come, small by its prompt alone
        "bm = BlockManager(num_blocks=4, block_size=2)",
        "sched = Scheduler(bm, watermark=1)",
        "sched.add(Sequence.dummy(0, prompt_len=2, max_new_tokens=10))",
        "sched.add(Sequence.dummy(1, prompt_len=2, max_new_tokens=6))",
        *_steps(1),
    ),
    program(  # ids falling with arrival; a step with two victims
        "bm = BlockManager(num_blocks=4, block_size=1)",
        "sched = Scheduler(bm, watermark=0)",
        *[f"sched.add(Sequence.dummy({i}, prompt_len=1, max_new_tokens=3))" for i in (3, 2, 1, 0)],
        *_steps(5),
    ),
    program(
        "bm = BlockManager(num_blocks=8, block_size=4)",
        "sched = Scheduler(bm, watermark=0)",
        "sched.add(Sequence.dummy(0, prompt_len=20, max_new_tokens=1))",
        "sched.add(Sequence.dummy(1, prompt_len=16, max_new_tokens=1))",
        "sched.add(Sequence.dummy(2, prompt_len=4, max_new_tokens=1))",
        *_steps(3),
    ),
    program(  # a request added while the pool is in use: measured against the whole pool
        "bm = BlockManager(num_blocks=8, block_size=4)",
        "sched = Scheduler(bm, watermark=1)",
        "sched.add(Sequence.dummy(0, prompt_len=16, max_new_tokens=1))",
        *_steps(1),
        "sched.add(Sequence.dummy(1, prompt_len=20, max_new_tokens=4))",
        *_steps(3),
    ),
)

REPLAY = TopicReplay(
    "scheduler",
    _scheduler_ns,
    _scheduler_state,
    lambda v, c: plain(v),
    ("RequestTooLarge",),
    SEPARATING,
    subject="sched",
    classes=("Scheduler",),
    fields=scheduler_fields,
    reader=scheduler_reading,
    slip_reader=index_past_running,
)
"""How diagnosis replays this topic's programs (:mod:`servelab.grading.diagnose`)."""
