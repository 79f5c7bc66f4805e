"""Scheduler simulation: run any scheduler over a workload, with dummy tokens, to completion.

The simulator plays the engine's part without a model: after every ``step()`` it appends one
placeholder token to each sequence the step computed. It works with the reference
:class:`~servelab.kv.scheduler.Scheduler` and with a learner's, since it only uses ``add``,
``step``, ``running``, ``waiting`` and ``bm``. It counts what a scheduler costs (preemptions,
KV tokens thrown away and recomputed, blocks swapped), checks that no block is left held once
the queue drains, and can record one :class:`Frame` per step for the timeline widget.
"""

from __future__ import annotations

import random
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass, field
from typing import Any

from servelab.kv.scheduler import Sequence, StepOutput

__all__ = [
    "Arrival",
    "Frame",
    "SimResult",
    "SimulationStalled",
    "emit_tokens",
    "random_workload",
    "simulate",
    "snapshot",
]


class SimulationStalled(RuntimeError):
    """The queue did not drain within the step limit (a scheduler that cannot make progress)."""


@dataclass(frozen=True)
class Arrival:
    """A request that reaches the scheduler at ``step`` (sequence id = its index)."""

    step: int
    prompt_len: int
    max_new_tokens: int


def random_workload(
    n: int,
    *,
    seed: int,
    prompt_len: tuple[int, int] = (16, 256),
    max_new_tokens: tuple[int, int] = (16, 256),
    arrive_within: int = 0,
) -> list[Arrival]:
    """``n`` requests with uniform lengths, arriving uniformly in ``[0, arrive_within]``."""
    if n < 0 or arrive_within < 0:
        raise ValueError("n and arrive_within must be non-negative")
    for name, (lo, hi) in (("prompt_len", prompt_len), ("max_new_tokens", max_new_tokens)):
        if not 1 <= lo <= hi:
            raise ValueError(f"{name} range must satisfy 1 <= lo <= hi, got ({lo}, {hi})")
    rng = random.Random(seed)
    arrivals = [
        Arrival(
            rng.randint(0, arrive_within),
            rng.randint(*prompt_len),
            rng.randint(*max_new_tokens),
        )
        for _ in range(n)
    ]
    return sorted(arrivals, key=lambda a: a.step)


def emit_tokens(out: StepOutput, token: int = 0) -> None:
    """Play the engine: append one sampled (dummy) token to every sequence the step computed."""
    for seq in out.computed():
        seq.append_token(token)


@dataclass(frozen=True)
class Frame:
    """The scheduler's queues after one step, for the timeline renderer."""

    step: int
    running: tuple[int, ...]  # oldest first
    waiting: tuple[int, ...]  # next to admit first
    prefilled: frozenset[int]
    decoded: frozenset[int]
    preempted: frozenset[int]
    finished: frozenset[int]
    free_blocks: int
    num_blocks: int
    watermark: int
    held: tuple[tuple[int, int], ...] = ()  # (seq_id, blocks in its table), running ones
    # a token-budget step: the tokens its decodes and its prefill chunks computed, and the
    # budget (0: a scheduler without one, and the timeline draws no token panel)
    decode_tokens: int = 0
    prefill_tokens: int = 0
    budget: int = 0


def _held(sched: Any) -> tuple[tuple[int, int], ...]:
    """Blocks each running sequence holds; empty when the block manager cannot say."""
    try:
        return tuple((s.seq_id, len(sched.bm.block_table(s.seq_id))) for s in sched.running)
    except Exception:  # a learner's block manager without block_table: draw without it
        return ()


def snapshot(sched: Any, out: StepOutput, step: int) -> Frame:
    """Record ``sched`` (any scheduler with the learner-facing API) after ``out``."""
    return Frame(
        step=step,
        running=tuple(s.seq_id for s in sched.running),
        waiting=tuple(s.seq_id for s in sched.waiting),
        prefilled=frozenset(p.seq.seq_id for p in out.prefills),
        decoded=frozenset(d.seq.seq_id for d in out.decodes),
        preempted=frozenset(s.seq_id for s in out.preempted),
        finished=frozenset(s.seq_id for s in out.finished),
        free_blocks=sched.bm.num_free,
        num_blocks=sched.bm.num_blocks,
        watermark=sched.watermark,
        held=_held(sched),
    )


@dataclass
class SimResult:
    """What a run cost. ``recomputed_tokens`` counts KV tokens discarded by recompute
    preemptions, which a later prefill computes again: pure waste."""

    steps: int = 0
    preemptions: int = 0
    recomputed_tokens: int = 0
    swapped_out_blocks: int = 0
    prefills: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    finished: int = 0
    leaked_blocks: int = 0
    frames: list[Frame] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.finished} sequences in {self.steps} steps: {self.preemptions} preemptions, "
            f"{self.recomputed_tokens} KV tokens recomputed, {self.swapped_out_blocks} blocks "
            f"swapped out, {self.leaked_blocks} blocks leaked"
        )


def simulate(
    sched: Any,
    workload: SequenceOf[Arrival],
    *,
    max_steps: int | None = None,
    record: bool = False,
) -> SimResult:
    """Run ``workload`` through ``sched`` until every request has finished and been retired.

    ``max_steps`` defaults to a bound no correct scheduler reaches (each step gives at least
    the oldest sequence one token); beyond it :class:`SimulationStalled` is raised.
    """
    if max_steps is None:
        last = max((a.step for a in workload), default=0)
        max_steps = last + sum(a.max_new_tokens + 1 for a in workload) + 2
    pending = sorted(enumerate(workload), key=lambda ia: ia[1].step)
    result = SimResult()
    next_arrival = 0
    is_swapped = getattr(sched, "is_swapped", None)
    step = 0
    while next_arrival < len(pending) or sched.running or sched.waiting:
        if step >= max_steps:
            raise SimulationStalled(
                f"{len(sched.running)} running and {len(sched.waiting)} waiting after "
                f"{max_steps} steps"
            )
        while next_arrival < len(pending) and pending[next_arrival][1].step <= step:
            seq_id, a = pending[next_arrival]
            sched.add(Sequence.dummy(seq_id, a.prompt_len, a.max_new_tokens))
            next_arrival += 1
        out = sched.step()
        for victim in out.preempted:
            result.preemptions += 1
            if is_swapped is None or not is_swapped(victim.seq_id):
                result.recomputed_tokens += victim.num_tokens - 1
        result.swapped_out_blocks += len(out.swap_out)
        result.prefills += len(out.prefills)
        result.prefill_tokens += sum(p.num_tokens for p in out.prefills)
        result.decode_tokens += len(out.decodes)
        result.finished += len(out.finished)
        emit_tokens(out)
        if record:
            result.frames.append(snapshot(sched, out, step))
        step += 1
    result.steps = step
    result.leaked_blocks = sched.bm.num_blocks - sched.bm.num_free
    return result
