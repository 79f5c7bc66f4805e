"""A SIEVE sweep that moves the keys it passes to the newest end (CLOCK's way) is named only
where a new policy of the learner's class shows the queue reordered; a sweep that keeps the
keys in place but never sets the hand is still told about the hand."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.weights.policies import NoVictim

FINAL = checkpoint("eviction-policy", 4)


def _report(sieve: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("eviction-policy", {**FINAL, "SIEVE": sieve}, 4)
    return str(failed.value)


class _SurvivorsToBack(FINAL["SIEVE"]):  # type: ignore[misc,valid-type]
    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        while True:
            key = next(k for k in self.queue if k not in self.pinned)
            if self.visited[key]:
                self.visited[key] = False
                self.queue.remove(key)
                self.queue.append(key)
            else:
                self.update_on_remove(key)
                return key


class _HandNeverSet(FINAL["SIEVE"]):  # type: ignore[misc,valid-type]
    """Sweeps from the oldest key every time, keys left in place, the hand never set."""

    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        while True:
            for key in self.queue:
                if key in self.pinned:
                    continue
                if self.visited[key]:
                    self.visited[key] = False
                    continue
                self.update_on_remove(key)
                return key


def test_a_sweep_moving_passed_keys_to_the_newest_end_is_named() -> None:
    said = _report(_SurvivorsToBack)
    assert "moves each key the sweep passes to the newest end" in said
    assert "leaves the queue ['c', 'a'], the reference ['a', 'c']" in said
    assert "set the hand to the victim" not in said


def test_a_sweep_keeping_keys_in_place_is_not_said_to_move_them() -> None:
    said = _report(_HandNeverSet)
    assert "moves each key the sweep passes" not in said
    assert "but left the hand at None" in said
