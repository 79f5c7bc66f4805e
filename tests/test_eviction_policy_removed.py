"""A pop_victim that evicts one key and returns another is told what it removed and what it
returned, proven by replaying the call on a copy, graded end to end; a look-alike sweep that
evicts and returns the same wrong key keeps the sweep hint."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.weights.policies.interface import NoVictim

STEP4 = checkpoint("eviction-policy", 4)
SIEVE, LFU = STEP4["SIEVE"], STEP4["LFU"]
REMOVED = "the key removed and the key returned must be the same"


def _hint(**classes: Any) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("eviction-policy", {**STEP4, **classes}, 4)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _AnswersWithHand(SIEVE):  # type: ignore[misc]
    """Sweeps and evicts as the reference does, then answers with where the hand rests."""

    def pop_victim(self) -> Any:
        SIEVE.pop_victim(self)
        return self.hand


class _AnswersWithNewest(LFU):  # type: ignore[misc]
    """Evicts the least used key, then answers with the newest key still counted."""

    def pop_victim(self) -> Any:
        victim = LFU.pop_victim(self)
        return list(self.count)[-1] if self.count else victim


class _SkipsBits(SIEVE):  # type: ignore[misc]
    """Evicts (and returns) the first unpinned key from the hand, reading no visited bit."""

    def pop_victim(self) -> Any:
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while self.queue[i % len(self.queue)] in self.pinned:
            i += 1
        key = self.queue[i % len(self.queue)]
        self.hand = key
        self.update_on_remove(key)
        return key


def test_a_sieve_answering_with_its_hand_is_told_what_it_removed_and_returned() -> None:
    hint = _hint(SIEVE=_AnswersWithHand)
    assert REMOVED in hint
    assert "yours removed 'b' (the reference's victim too) from its `queue` and `visited`" in hint
    assert "but returned 'c', the key your hand rests on after the call" in hint
    assert "yours evicted" not in hint and "the hand moves from older" not in hint


def test_an_lfu_answering_with_another_key_is_told_what_it_removed_and_returned() -> None:
    hint = _hint(LFU=_AnswersWithNewest)
    assert REMOVED in hint
    assert "yours removed " in hint and "from its `count` and `reached` but returned " in hint
    assert "your hand" not in hint


def test_a_sweep_that_evicts_the_key_it_returns_keeps_the_sweep_hint() -> None:
    hint = _hint(SIEVE=_SkipsBits)
    assert REMOVED not in hint and "yours removed" not in hint
    assert "yours evicted " in hint


def test_a_victim_not_proved_removed_is_called_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    import servelab.grading.readings.eviction_policy as readings

    monkeypatch.setattr(readings, "returned_not_removed", lambda d: None)
    hint = _hint(SIEVE=_AnswersWithHand)
    assert "yours returned 'c', the reference 'b'" in hint
    assert "yours evicted" not in hint


class _AnswersNothing(SIEVE):  # type: ignore[misc]
    """Sweeps and evicts as the reference does, then answers None, with the hand left at rest."""

    def pop_victim(self) -> Any:
        SIEVE.pop_victim(self)
        self.hand = None
        return None


def test_an_answer_of_none_is_not_called_the_key_under_the_hand() -> None:
    hint = _hint(SIEVE=_AnswersNothing)
    assert REMOVED in hint and "but returned None:" in hint
    assert "your hand" not in hint
