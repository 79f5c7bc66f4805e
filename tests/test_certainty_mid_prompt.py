"""A token-budget victim preempted mid-prompt separates slips that agree on decoding victims.

The programs that separate the topic's known mistakes preempted only requests already past
their prompt. A scheduler that re-queues a victim at the back only once it has sampled (one
still in its prompt goes to the front), or one that restarts a victim at its prefix hit
rather than 0, gave the same numbers there as the catalogue's re-queue-at-the-back and
keeps-its-count mistakes, and was told it "behaves exactly like" them. A separating program
now preempts a request mid-prompt, with a newcomer waiting and a part-filled block.
"""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.mistakes import mistakes

TOPIC = "token-budget"
Final = checkpoint(TOPIC, 3)


class FrontUntilSampled(Final):
    """A victim that has sampled no token yet goes to the front of waiting; one that has,
    to the back."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        if victim.num_generated == 0:
            self.waiting.appendleft(victim)
        else:
            self.waiting.append(victim)
        out.preempted.append(victim)


class RestartsAtItsHit(Final):
    """A victim restarts at what the prefix cache still holds of it, not at 0."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = self.cached_tokens(victim)
        self.waiting.appendleft(victim)
        out.preempted.append(victim)


CASES = [(FrontUntilSampled, "requeue_back"), (RestartsAtItsHit, "preempt_keeps_computed")]


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_a_look_alike_on_decoding_victims_is_not_told_exactly_like(case: Any) -> None:
    impl, twin = case
    report, _ = failing_report(TOPIC, impl, 3)
    assert "exactly like" not in report.hint, report.hint
    m = next(m for m in mistakes(TOPIC) if m.name == twin)
    mine, _ = failing_report(TOPIC, m.impl, 3)
    assert f"behaves exactly like one that {m.like}" in mine.hint, mine.hint
