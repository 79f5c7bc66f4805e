"""Serve requests with a learner's engine and hold every output against dense generation.

:func:`serve` runs an :class:`~servelab.kv.learner_engine.EngineSkeleton` subclass to the end
on the tiny model and returns a :class:`CapstoneRun`: what it served (tokens per second,
blocks used, preemptions, prefix hits, copies) and how it compares with a dense run of each
request. It stops at the first wrong KV slot (the engine's ledger raises there) and keeps
that report; otherwise it compares every token and names the first that differs.

The printed summary is short and in a fixed order; only tokens per second depends on the
machine, and the line says which device it ran on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servelab.kv.engine import Completion, Request
from servelab.kv.ledger import KVDivergence

__all__ = ["CapstoneRun", "TokenDifference", "serve"]


@dataclass(frozen=True)
class TokenDifference:
    """The first token of a completion that differs from dense generation."""

    request: int
    sample: int
    position: int  # among the generated tokens
    got: int
    want: int


@dataclass
class CapstoneRun:
    """What one :func:`serve` run did and how it compares with dense generation."""

    engine: Any
    requests: list[Request]
    completions: list[Completion] = field(default_factory=list)
    divergence: KVDivergence | None = None
    difference: TokenDifference | None = None
    tokens_compared: int = 0

    @property
    def equal(self) -> bool:
        """Every generated token equals dense generation, and no slot was read wrong."""
        done = len(self.completions) == len(self.requests)
        return done and self.divergence is None and self.difference is None

    def summary(self) -> str:
        e, st = self.engine, self.engine.stats
        samples = sum(r.n for r in self.requests)
        steps = f"{st.steps} step{'s' if st.steps != 1 else ''}"
        if self.divergence is not None:
            steps = f"{steps}, then stopped in step {self.divergence.step}"
        lines = [
            f"served {len(self.completions)} of {len(self.requests)} requests ({samples} "
            f"samples) in {steps} on {e.model.device.type}",
            f"  tokens per second: {st.tokens_per_s:,.0f} (this machine, this run)",
            f"  blocks used: peak {st.peak_blocks_used} of {e.blocks.num_blocks}",
            f"  preemptions: {st.preemptions} · prefix hits: {e.prefix_hits} prefills, "
            f"{st.cached_tokens} tokens not recomputed · copy-on-write copies: "
            f"{st.cow_copies} · forks: {st.forks}",
        ]
        if self.divergence is not None:
            lines.append("first wrong KV slot:")
            lines += [f"  {line}" for line in self.divergence.describe().splitlines()]
        elif self.difference is not None:
            d = self.difference
            lines.append(
                f"request {d.request}, sample {d.sample}: new token {d.position} is {d.got}, "
                f"dense generation gives {d.want}"
            )
        else:
            lines.append(
                f"every token equals dense generation ({self.tokens_compared} of "
                f"{self.tokens_compared})"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def serve(
    engine_class: Any,
    requests: Sequence[Request],
    *,
    num_blocks: int = 24,
    block_size: int = 4,
    watermark: int = 1,
    record: bool = True,
    model: Any = None,
    later: Mapping[int, Sequence[Request]] | None = None,
) -> CapstoneRun:
    """Serve ``requests`` with ``engine_class`` to the end; compare with dense generation.

    ``later`` maps a step number to requests that arrive after that step (online arrivals,
    as a live server gets them). ``model`` defaults to the reference tiny model (the one the
    grader serves), on CUDA when it is available and on the CPU otherwise.
    """
    from servelab.testing.engine import dense_samples, reference_model

    model = model if model is not None else _on_best_device(reference_model())
    engine = engine_class(
        model, num_blocks=num_blocks, block_size=block_size, watermark=watermark, record=record
    )
    arrivals = {int(k): list(v) for k, v in (later or {}).items()}
    run = CapstoneRun(engine, list(requests))
    ids = [engine.add(r) for r in requests]
    try:
        while not engine.is_idle or any(k > engine.stats.steps for k in arrivals):
            if engine.is_idle:  # nothing to do until the next arrival: idle steps
                engine.stats.steps += 1
            else:
                engine.step()
            for r in arrivals.pop(engine.stats.steps, []):
                run.requests.append(r)
                ids.append(engine.add(r))
    except KVDivergence as exc:
        run.divergence = exc
        return run
    done = {c.request_id: c for c in engine.completions()}
    run.completions = [done[i] for i in ids if i in done]
    for position, rid in enumerate(ids):
        if rid not in done:
            continue
        completion = done[rid]
        expected = dense_samples(run.requests[position])
        for index, got in enumerate(completion.samples):
            want = list(expected[index])
            run.tokens_compared += len(want)
            if got != want and run.difference is None:
                pos = next(
                    (j for j, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                    min(len(got), len(want)),
                )
                run.difference = TokenDifference(
                    rid,
                    index,
                    pos,
                    got[pos] if pos < len(got) else -1,
                    want[pos] if pos < len(want) else -1,
                )
    return run


def _on_best_device(model: Any) -> Any:
    """The reference model on CUDA when there is one (a copy: the grader's stays on CPU)."""
    import torch

    if not torch.cuda.is_available():
        return model
    from servelab.kv.model import TinyLlama

    return TinyLlama(model.config, device="cuda")
