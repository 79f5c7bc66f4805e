"""A failing token-budget grade shrinks within the topic's own bound, and still names FCFS."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

import servelab.grading.core as grading_core
from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading import token_budget as token_budget_grading
from servelab.grading.topic import SHRINK_PROGRAMS as TOPIC_WIDE
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

TOPIC = "token-budget"


class FillsPastALongHead(checkpoint(TOPIC, 1)):  # type: ignore[misc]
    """Admits any waiting prompt that fits the budget left, passing a long head by."""

    def admit(self, out: Any, budget: int) -> None:
        for seq in list(self.waiting):
            if len(self.running) >= self.max_num_seqs:
                break
            n = seq.num_tokens
            if n > budget:
                continue
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids)
            except OutOfBlocks:
                break
            self.waiting.remove(seq)
            self.running.append(seq)
            out.scheduled.append(Chunk(seq, 0, n, self.slots(seq, 0, n), True))
            self.computed[seq.seq_id] = n
            budget -= n


def test_every_token_budget_machine_uses_the_topic_bound() -> None:
    assert token_budget_grading.SHRINK_PROGRAMS < TOPIC_WIDE
    machines = [s.machine for s in token_budget_grading.TOPIC.steps if s.machine is not None]
    assert machines
    assert {m.shrink_programs for m in machines} == {token_budget_grading.SHRINK_PROGRAMS}


def test_a_failing_grade_shrinks_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    bounds: list[int] = []
    real = grading_core.shrinking_bounded_by_count

    @contextmanager
    def recorded(programs: int) -> Iterator[None]:
        bounds.append(programs)
        bounded: AbstractContextManager[None] = real(programs)
        with bounded:
            yield

    monkeypatch.setattr(grading_core, "shrinking_bounded_by_count", recorded)
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, FillsPastALongHead, 1)
    assert bounds and set(bounds) == {token_budget_grading.SHRINK_PROGRAMS}
    report = str(failure.value)
    assert "state machine: add and step, whole prompts" in report
    assert "first come, first served" in report
    assert "start at your `admit`" in report
