"""Certainty is earned on every field and on programs around the failing one.

A SIEVE that clears every visited bit when its sweep wraps agrees with the catalogue's
"evicts the oldest key after a full lap" on the failing program, on the separating programs
and on their number and name variants: the two part only where an unvisited key lies between
the oldest key and the hand at a wrap, a state none of those programs reaches. It was told
"behaves exactly like one that ..."; compared call by call with every field read, on the
failing program continued after each call and on seeded programs of its calls, it is asked a
question now, and the catalogue's mistakes are still named.
"""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab.grading.certainty import FRESH, agrees_everywhere, programs_around
from servelab.grading.diagnose import topic_hook
from servelab.grading.mistakes import correct_impl, mistakes
from servelab.weights.policies import NoVictim

TOPIC = "eviction-policy"
FINAL = correct_impl(TOPIC)
FAILING = "\n".join(
    [
        "p = SIEVE()",
        *[f"p.update_on_put('m{i}', 1)" for i in range(3)],
        "p.update_on_hit('m0')",
        "p.pop_victim()",
        "p.update_on_hit('m0')",
        "p.update_on_hit('m2')",
        "p.pop_victim()",
    ]
)


class WrapClearsEveryBit(FINAL["SIEVE"]):  # type: ignore[misc, valid-type]
    """At a wrap the sweep clears the visited bit of every key at once, not as it passes."""

    def pop_victim(self) -> Any:
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
                for k in self.queue:
                    self.visited[k] = False
            key = self.queue[i]
            if key in self.pinned or self.visited[key]:
                self.visited[key] = False if key not in self.pinned else self.visited[key]
                i += 1
            else:
                self.hand = key
                self.update_on_remove(key)
                return key


def _mistake(name: str) -> Any:
    return next(m for m in mistakes(TOPIC) if m.name == name)


def test_a_near_twin_that_parts_on_a_rarer_state_is_asked_not_told() -> None:
    report, _ = failing_report(TOPIC, {**FINAL, "SIEVE": WrapClearsEveryBit})
    assert "exactly like" not in report.hint, report.hint
    like = _mistake("sieve_lap_falls_back_oldest").like
    assert f"comes from a policy that {like}: does yours do that?" in report.hint


def test_the_twins_part_on_a_program_around_the_failing_one() -> None:
    spec = topic_hook(TOPIC).spec  # type: ignore[union-attr]
    twin = _mistake("sieve_lap_falls_back_oldest").impl
    mine = {**FINAL, "SIEVE": WrapClearsEveryBit}
    assert not agrees_everywhere(spec, FAILING, mine, twin)
    assert agrees_everywhere(spec, FAILING, twin, twin)


@pytest.mark.parametrize(
    "name", ["sieve_lap_falls_back_oldest", "sieve_hand_resets", "sieve_keeps_visited"]
)
def test_the_mistake_itself_is_still_named_with_certainty(name: str) -> None:
    m = _mistake(name)
    report, _ = failing_report(TOPIC, m.impl)
    assert f"behaves exactly like one that {m.like}" in report.hint, report.hint


def test_the_programs_around_are_the_same_on_every_run_and_reach_further() -> None:
    spec = topic_hook(TOPIC).spec  # type: ignore[union-attr]
    around = programs_around(spec, FAILING)
    assert around == programs_around(spec, FAILING)
    assert all(text.startswith("p = SIEVE()\n") for text in around)
    assert any(f"'{FRESH}'" in text for text in around)  # a key the program never named
    assert any("update_on_pin(" in text for text in around)  # a call only separating ones make
    prefix = "\n".join(FAILING.splitlines()[:5])
    assert sum(text.startswith(prefix + "\n") for text in around) >= 2
