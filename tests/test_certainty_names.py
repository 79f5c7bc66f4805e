"""Certainty holds whatever the keys are called, not only for the names the programs give them.

Programs put keys in the order of their names ('a', then 'b'), and number variants leave names
as they are: a SIEVE that falls back to, or restarts its sweep at, the key first by name picks
the oldest key there, as the catalogue's mistakes do. Each look-alike below was told "behaves
exactly like" before the programs were also replayed with their names exchanged; it is asked
a question now, and the mistake itself is still named.
"""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab.grading.mistakes import correct_impl, mistakes
from servelab.grading.name_variants import name_variants
from servelab.weights.policies import NoVictim

TOPIC = "eviction-policy"
FINAL = correct_impl(TOPIC)


class OneLapFirstName(FINAL["SIEVE"]):  # type: ignore[misc, valid-type]
    """After a full lap of visited keys, evicts the unpinned key first by name."""

    def pop_victim(self) -> Any:
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        n = len(self.queue)
        start = 0 if self.hand is None else self.queue.index(self.hand)
        for step in range(n):
            key = self.queue[(start + step) % n]
            if key in self.pinned:
                continue
            if self.visited[key]:
                self.visited[key] = False
                continue
            self.hand = key
            self.update_on_remove(key)
            return key
        key = min(k for k in self.queue if k not in self.pinned)
        self.hand = key
        self.update_on_remove(key)
        return key


class HandToFirstName(FINAL["SIEVE"]):  # type: ignore[misc, valid-type]
    """After every eviction the sweep starts again at the key first by name."""

    def pop_victim(self) -> Any:
        self.hand = min(self.queue) if self.queue else None
        return super().pop_victim()


LOOK_ALIKES = [
    (OneLapFirstName, "sieve_lap_falls_back_oldest"),
    (HandToFirstName, "sieve_hand_resets"),
]


def _like(name: str) -> str:
    return next(m for m in mistakes(TOPIC) if m.name == name).like


@pytest.mark.parametrize("case", LOOK_ALIKES, ids=[c[1] for c in LOOK_ALIKES])
def test_a_look_alike_by_names_is_asked_not_told(case: tuple[Any, str]) -> None:
    cls, twin = case
    report, _ = failing_report(TOPIC, {**FINAL, "SIEVE": cls})
    assert "exactly like" not in report.hint, report.hint
    assert f"comes from a policy that {_like(twin)}: does yours do that?" in report.hint


@pytest.mark.parametrize("twin", [c[1] for c in LOOK_ALIKES])
def test_the_mistake_itself_is_still_named_with_certainty(twin: str) -> None:
    m = next(m for m in mistakes(TOPIC) if m.name == twin)
    report, _ = failing_report(TOPIC, m.impl)
    assert f"behaves exactly like one that {m.like}" in report.hint, report.hint


def test_names_are_exchanged_among_themselves_the_same_on_every_run() -> None:
    text = "p.update_on_put('a', 1)\np.update_on_put(\"b\", 1)\nt = Tier(1, 'FIFO')"
    first = name_variants(text)
    assert first == name_variants(text)
    assert first[0] == "p.update_on_put('b', 1)\np.update_on_put(\"a\", 1)\nt = Tier(1, 'FIFO')"
    assert name_variants("p.update_on_put('a', 1)") == []
