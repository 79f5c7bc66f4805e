"""How diagnosis replays the programs of topic ``token-budget``: names, state, values, and the
programs that tell its known mistakes apart (:mod:`servelab.grading.diagnose`).

Apart from :mod:`servelab.grading.token_budget` only to keep each file short enough to read in
one sitting; the topic declares :data:`REPLAY` as its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from servelab.grading.block_manager import graded_blocks
from servelab.grading.observe import Canon, budget_fields, frozen
from servelab.grading.readings.budget_kept import chunk_only_allocated
from servelab.grading.readings.token_budget import token_budget_reading
from servelab.grading.replay import TopicReplay, plain, program
from servelab.kv.blocks import BlockManager
from servelab.kv.budget import BudgetStep
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import Sequence

__all__ = ["NAME", "REPLAY", "SEPARATING"]

NAME = "TokenBudgetScheduler"


def _budget_ns(impl: Any) -> dict[str, Any]:
    from servelab.kv.sim import emit_tokens

    return {
        NAME: impl,
        "BlockManager": BlockManager,
        "BudgetStep": BudgetStep,
        "PrefixCachingBlockManager": PrefixCachingBlockManager,
        "Sequence": Sequence,
        "emit_tokens": emit_tokens,
    }


def _budget_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    sched = ns.get("sched")
    if sched is None:
        return None
    out = ns.get("out")
    step: Hashable = None
    if out is not None:
        step = (
            tuple(
                (c.seq.seq_id, *c[1:3], c.samples, c.num_cached, tuple(map(canon, c.slots)))
                for c in getattr(out, "scheduled", ())
            ),
            tuple(s.seq_id for s in out.preempted),
            tuple(s.seq_id for s in out.finished),
        )
    fields = budget_fields(sched, canon)
    return (step, graded_blocks(fields) if "tables" in fields else frozen(fields))


def _steps(n: int) -> list[str]:
    return ["out = sched.step()", "emit_tokens(out)"] * n


SEPARATING = (
    program(  # chunks, a decode beside a long prompt, a prefix hit, the cap
        "bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=6, max_num_seqs=3)",
        "sched.add(Sequence.from_prompt(0, [1, 2, 3, 4, 5], 3))",
        "sched.add(Sequence.from_prompt(1, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], 2))",
        "sched.add(Sequence.from_prompt(2, [1, 2, 3, 4, 9], 2))",
        "sched.add(Sequence.from_prompt(3, [7], 2))",
        *_steps(8),
    ),
    program(  # memory pressure: who is preempted, where it waits, where it restarts
        "bm = PrefixCachingBlockManager(num_blocks=4, block_size=2)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=8, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [1, 2], 3))",
        "sched.add(Sequence.from_prompt(1, [11, 12], 3))",
        "sched.add(Sequence.from_prompt(2, [21, 22], 3))",
        "sched.add(Sequence.from_prompt(3, [31], 1))",
        *_steps(3),
        "sched.num_computed_tokens(2)",
        *_steps(4),
    ),
    program(  # a prefix hit beside another admission in the same step
        "bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=12, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [0, 1, 2, 3, 4, 5, 6, 7, 8], 1))",
        *_steps(2),
        "sched.add(Sequence.from_prompt(1, [0, 1, 2, 3, 4, 5, 6, 7, 50, 51], 1))",
        "sched.add(Sequence.from_prompt(2, [60, 61, 62], 1))",
        *_steps(1),
    ),
    program(  # a victim preempted with 3 tokens computed, 2 of them in a cached block
        "bm = PrefixCachingBlockManager(num_blocks=4, block_size=2)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=8, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [1, 2], 3))",
        "sched.add(Sequence.from_prompt(1, [11, 12], 3))",
        "sched.add(Sequence.from_prompt(2, [21, 22, 23], 3))",
        *_steps(2),
        "sched.num_computed_tokens(2)",
    ),
    program(  # a victim and a newcomer in the queue: who comes back first
        "bm = PrefixCachingBlockManager(num_blocks=4, block_size=2)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=8, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [1, 2], 3))",
        "sched.add(Sequence.from_prompt(1, [11, 12], 3))",
        "sched.add(Sequence.from_prompt(2, [21, 22], 3))",
        *_steps(1),
        "sched.add(Sequence.from_prompt(3, [31], 1))",
        *_steps(4),
    ),
    program(  # a victim preempted mid-prompt (its own extend fails), a newcomer waiting
        "bm = PrefixCachingBlockManager(num_blocks=4, block_size=2)",
        "sched = TokenBudgetScheduler(bm, max_num_batched_tokens=3, max_num_seqs=4)",
        "sched.add(Sequence.from_prompt(0, [1, 2], 4))",
        "sched.add(Sequence.from_prompt(1, [11, 12, 13, 14, 15, 16], 1))",
        *_steps(1),
        "sched.add(Sequence.from_prompt(2, [21], 1))",
        *_steps(2),
        "sched.num_computed_tokens(1)",
        *_steps(5),
    ),
)

REPLAY = TopicReplay(
    "scheduler",
    _budget_ns,
    _budget_state,
    lambda v, c: None if type(v).__name__ == "BudgetStep" else plain(v),
    ("RequestTooLarge", "UnknownSequence"),
    SEPARATING,
    subject="sched",
    classes=(NAME,),
    fields=budget_fields,
    reader=token_budget_reading,
    slip_reader=chunk_only_allocated,
)
"""How diagnosis replays this topic's programs (:mod:`servelab.grading.diagnose`)."""
