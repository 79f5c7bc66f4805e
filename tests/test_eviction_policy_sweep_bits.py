"""A SIEVE sweep that takes the key under the hand without looking at its bit, or clears bits
the hand never reached when it wraps, is told so, proven on fresh policies or copies, graded
end to end; look-alikes (a sweep that reads no bit, one that evicts the oldest key after a full
lap) get no such sentence."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.readings.difference import Difference
from servelab.grading.readings.eviction_policy_sweep import hand_key_unlooked
from servelab.weights.policies.interface import NoVictim

STEP4 = checkpoint("eviction-policy", 4)
SIEVE = STEP4["SIEVE"]
UNLOOKED = "yours evicts the key under the hand without looking at its bit"
WRAPPED = "yours clears bits the hand has not reached when it wraps"


def _hint(sieve: Any) -> str:
    impl = {**STEP4, "SIEVE": sieve}
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("eviction-policy", impl, 4)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _HandKeyGoes(SIEVE):  # type: ignore[misc]
    """Evicts the key under the hand at once when it is not pinned."""

    def pop_victim(self) -> Any:
        if self.hand is not None and self.hand not in self.pinned:
            key = self.hand
            self.update_on_remove(key)
            return key
        return super().pop_victim()


class _WrapForgetsAll(SIEVE):  # type: ignore[misc]
    """Sets every bit back to False at once when the sweep passes the newest key."""

    def pop_victim(self) -> Any:
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i >= len(self.queue):
                i = 0
                self.visited = dict.fromkeys(self.visited, False)
            key = self.queue[i]
            if key not in self.pinned and not self.visited[key]:
                self.hand = key
                self.update_on_remove(key)
                return key
            if key not in self.pinned:
                self.visited[key] = False
            i += 1


class _NoBits(SIEVE):  # type: ignore[misc]
    """Evicts the oldest unpinned key, whatever its bit."""

    def pop_victim(self) -> Any:
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        key = next(k for k in self.queue if k not in self.pinned)
        self.update_on_remove(key)
        return key


class _OldestAfterLap(SIEVE):  # type: ignore[misc]
    """After a full lap of visited keys, evicts the oldest instead of going on from the hand."""

    def pop_victim(self) -> Any:
        candidates = [k for k in self.queue if k not in self.pinned]
        if candidates and all(self.visited[k] for k in candidates):
            for k in candidates:
                self.visited[k] = False
            key = candidates[0]
            self.hand = key
            self.update_on_remove(key)
            return key
        return super().pop_victim()


class _HitMissesTheHandKey(SIEVE):  # type: ignore[misc]
    """Sets no bit for a hit on the key under the hand; its sweep reads every bit."""

    def update_on_hit(self, key: Any) -> None:
        if key != self.hand:
            super().update_on_hit(key)


def _unlooked_on(sieve: Any) -> str | None:
    d = Difference("pop_victim", "SIEVE", (), {}, {}, {}, "", "", None, impl=sieve)
    return hand_key_unlooked(d)


def test_the_key_under_the_hand_taken_unlooked_is_named() -> None:
    assert UNLOOKED in _hint(_HandKeyGoes)


def test_bits_cleared_at_the_wrap_are_named() -> None:
    assert WRAPPED in _hint(_WrapForgetsAll)


@pytest.mark.parametrize("sieve", [_NoBits, _OldestAfterLap])
def test_look_alikes_are_not_put_on_the_hand_or_the_wrap(sieve: Any) -> None:
    hint = _hint(sieve)
    assert UNLOOKED not in hint
    assert WRAPPED not in hint


def test_a_hit_that_set_no_bit_is_not_said_to_be_evicted_with_its_bit_set() -> None:
    assert _unlooked_on(_HitMissesTheHandKey) is None
    assert UNLOOKED in (_unlooked_on(_HandKeyGoes) or "")
