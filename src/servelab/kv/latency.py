"""Latency under a scheduler: time to first token and inter-token latency, in modelled time.

The step simulator in :mod:`servelab.kv.sim` counts steps; latency needs a clock. Here each
step costs :meth:`CostModel.step_ms` of modelled time, a linear model of a compute-bound
forward pass: a fixed cost per step (reading the weights, launching kernels) plus a cost per
token computed in it, prefill and decode tokens alike. That is the trade-off a token budget
sets: a step that takes a 2,000-token prefill is long, and every running request waits for it
between two of its tokens (ITL); a small budget spreads that prefill over many short steps,
so decodes keep flowing but the prompt's first token comes later (TTFT).

:func:`simulate_latency` replays requests arriving on that clock through either scheduler
(the v0-style :class:`~servelab.kv.scheduler.Scheduler` or the
:class:`~servelab.kv.budget.TokenBudgetScheduler`), playing the engine (one dummy token per
sampling request per step), and reports TTFT and ITL percentiles and preemptions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass, field
from typing import Any

from servelab.kv.budget import BudgetStep, TokenBudgetScheduler
from servelab.kv.scheduler import Scheduler, Sequence, StepOutput
from servelab.kv.sim import Frame, SimulationStalled, snapshot

__all__ = [
    "CostModel",
    "LatencyResult",
    "TimedArrival",
    "budget_snapshot",
    "percentile",
    "poisson_workload",
    "simulate_latency",
    "step_tokens",
]


@dataclass(frozen=True)
class CostModel:
    """Modelled time of one step: ``step_ms + token_ms * tokens computed in it``.

    The defaults are round figures of the order of a 7B model on one datacenter GPU (about
    10 ms for a small decode batch, about 100 ms for a 2,000-token prefill); only their ratio
    shapes the trade-off.
    """

    step_ms: float = 8.0
    token_ms: float = 0.05

    def __post_init__(self) -> None:
        if not (self.step_ms >= 0 and self.token_ms >= 0):
            raise ValueError(f"costs must be non-negative, got {self}")

    def step_time(self, tokens: int) -> float:
        return self.step_ms + self.token_ms * tokens


@dataclass(frozen=True)
class TimedArrival:
    """A request reaching the scheduler at ``at_ms`` (sequence id = its index)."""

    at_ms: float
    prompt_len: int
    max_new_tokens: int


def poisson_workload(
    n: int,
    *,
    seed: int,
    rate_per_s: float,
    prompt_len: tuple[int, int] = (64, 1024),
    max_new_tokens: tuple[int, int] = (16, 256),
) -> list[TimedArrival]:
    """``n`` requests with uniform lengths, arriving as a Poisson process of ``rate_per_s``."""
    if n < 0 or not rate_per_s > 0:
        raise ValueError("n must be non-negative and rate_per_s positive")
    rng = random.Random(seed)
    t = 0.0
    out = []
    for _ in range(n):
        t += rng.expovariate(rate_per_s) * 1000.0
        out.append(TimedArrival(t, rng.randint(*prompt_len), rng.randint(*max_new_tokens)))
    return out


def percentile(values: SequenceOf[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (``q`` in (0, 100]); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def step_tokens(out: StepOutput | BudgetStep) -> int:
    """Tokens a step computes: prefill tokens not found in the prefix cache, plus decodes."""
    if isinstance(out, BudgetStep):
        return out.num_batched_tokens
    return sum(p.num_tokens - p.num_cached for p in out.prefills) + len(out.decodes)


def budget_snapshot(sched: Any, out: BudgetStep, step: int) -> Frame:
    """A timeline :class:`~servelab.kv.sim.Frame` of a token-budget step: a chunk that decodes
    counts as decoded, any other chunk as prefilled, and the frame carries the step's decode
    and prefill tokens against the budget. ``sched`` is a :class:`TokenBudgetScheduler` or a
    class of the same shape (notebook 07's, which has no watermark: it counts as 0)."""
    decodes = [c for c in out.scheduled if c.is_decode]
    prefills = [c for c in out.scheduled if not c.is_decode]
    held = tuple((s.seq_id, len(sched.bm.block_table(s.seq_id))) for s in sched.running)
    return Frame(
        step=step,
        running=tuple(s.seq_id for s in sched.running),
        waiting=tuple(s.seq_id for s in sched.waiting),
        prefilled=frozenset(c.seq.seq_id for c in prefills),
        decoded=frozenset(c.seq.seq_id for c in decodes),
        preempted=frozenset(s.seq_id for s in out.preempted),
        finished=frozenset(s.seq_id for s in out.finished),
        free_blocks=sched.bm.num_free,
        num_blocks=sched.bm.num_blocks,
        watermark=getattr(sched, "watermark_blocks", 0),
        held=held,
        decode_tokens=len(decodes),
        prefill_tokens=sum(c.num_tokens for c in prefills),
        budget=sched.max_num_batched_tokens,
    )


@dataclass
class LatencyResult:
    """Per-request first-token delays and per-token gaps, in modelled milliseconds."""

    ttft_ms: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    steps: int = 0
    preemptions: int = 0
    tokens_computed: int = 0
    makespan_ms: float = 0.0
    leaked_blocks: int = 0
    frames: list[Frame] = field(default_factory=list)

    def row(self) -> dict[str, float]:
        """The figures a sweep prints: TTFT and ITL p50 / p99, preemptions, steps."""
        return {
            "ttft_p50": percentile(self.ttft_ms, 50),
            "ttft_p99": percentile(self.ttft_ms, 99),
            "itl_p50": percentile(self.itl_ms, 50),
            "itl_p99": percentile(self.itl_ms, 99),
            "preemptions": self.preemptions,
            "steps": self.steps,
            "makespan_s": self.makespan_ms / 1000,
        }


def simulate_latency(
    sched: Scheduler | TokenBudgetScheduler | Any,
    workload: SequenceOf[TimedArrival],
    cost: CostModel | None = None,
    *,
    max_steps: int = 10_000_000,
    record: bool = False,
) -> LatencyResult:
    """Serve ``workload`` through ``sched`` on the modelled clock; see the module docstring.

    A request's TTFT runs from its arrival to the end of the step that samples its first
    token; its ITL values are the gaps between the steps that sample its later tokens (a
    preempted request's recompute shows up as one long gap). ``record`` keeps one timeline
    :class:`~servelab.kv.sim.Frame` per step in ``frames``. Any class with the surface of
    either scheduler serves (a step that returns a :class:`BudgetStep` is a token-budget one).
    """
    cost = cost or CostModel()
    result = LatencyResult()
    arrivals = sorted(enumerate(workload), key=lambda ia: ia[1].at_ms)
    last_token: dict[int, float] = {}
    now = 0.0
    i = 0
    while i < len(arrivals) or not sched.is_idle:
        if result.steps >= max_steps:
            raise SimulationStalled(f"not drained after {max_steps} steps")
        if sched.is_idle and arrivals[i][1].at_ms > now:
            now = arrivals[i][1].at_ms  # nothing to do until the next request arrives
        while i < len(arrivals) and arrivals[i][1].at_ms <= now:
            sid, a = arrivals[i]
            sched.add(Sequence.dummy(sid, a.prompt_len, a.max_new_tokens))
            i += 1
        out = sched.step()
        tokens = step_tokens(out)
        now += cost.step_time(tokens)
        result.steps += 1
        result.tokens_computed += tokens
        result.preemptions += len(out.preempted)
        if record:
            if isinstance(out, BudgetStep):
                result.frames.append(budget_snapshot(sched, out, result.steps - 1))
            else:
                result.frames.append(snapshot(sched, out, result.steps - 1))
        for seq in out.computed():
            sid = seq.seq_id
            if seq.num_generated == 0:
                result.ttft_ms.append(now - workload[sid].at_ms)
            else:
                result.itl_ms.append(now - last_token[sid])
            last_token[sid] = now
            seq.append_token(0)
    result.makespan_ms = now
    result.leaked_blocks = sched.bm.num_blocks - sched.bm.num_free
    return result
