"""A SIEVE removal under the hand that moves the hand past the next newer key is named: one
key passed over (as a new policy of the learner's class shows again with more keys), or
pinned keys passed over (as a copy with them unpinned shows). A hand sent elsewhere is not
told either."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade

STEP = checkpoint("eviction-policy", 3)


def _report(sieve: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("eviction-policy", {**STEP, "SIEVE": sieve}, 3)
    return str(failed.value)


class _NextReadAfterDelete(STEP["SIEVE"]):  # type: ignore[misc,valid-type]
    def update_on_remove(self, key):
        i = self.queue.index(key)
        self.queue.pop(i)
        self.visited.pop(key)
        self.pinned.discard(key)
        if self.hand == key:
            self.hand = self.queue[i + 1] if i + 1 < len(self.queue) else None


class _HandToNewest(STEP["SIEVE"]):  # type: ignore[misc,valid-type]
    """Sends the hand to the newest key left (two keys on in a queue of four)."""

    def update_on_remove(self, key):
        self.queue.remove(key)
        self.visited.pop(key)
        self.pinned.discard(key)
        if self.hand == key:
            self.hand = self.queue[-1] if self.queue else None


class _PastPinned(STEP["SIEVE"]):  # type: ignore[misc,valid-type]
    def update_on_remove(self, key):
        i = self.queue.index(key)
        if self.hand == key:
            later = [k for k in self.queue[i + 1 :] if k not in self.pinned]
            self.hand = later[0] if later else None
        self.queue.pop(i)
        self.visited.pop(key)
        self.pinned.discard(key)


class _HandReset(STEP["SIEVE"]):  # type: ignore[misc,valid-type]
    """Sets the hand to None (the oldest) whenever its key is removed."""

    def update_on_remove(self, key):
        self.queue.remove(key)
        self.visited.pop(key)
        self.pinned.discard(key)
        if self.hand == key:
            self.hand = None


def test_a_hand_that_passes_over_one_key_is_named() -> None:
    said = _report(_NextReadAfterDelete)
    assert "yours moved the hand to 'd', two keys newer than 'b', passing over 'c'" in said
    assert "removing 'c' leaves it on 'e'" in said
    assert "does yours read the key after that index once 'b' is gone?" in said


def test_a_hand_sent_to_the_newest_key_is_not_told_it_passed_over_one() -> None:
    said = _report(_HandToNewest)
    assert "passing over" not in said
    assert "past pinned" not in said


def test_a_hand_that_passes_over_a_pinned_key_is_named() -> None:
    said = _report(_PastPinned)
    assert "yours moved the hand past pinned" in said
    assert "unpinned first, yours moves it onto" in said
    assert "pinned or not" in said
    assert "a key in no field" not in said


def test_a_hand_reset_to_the_oldest_is_not_told_it_passed_a_pinned_key() -> None:
    said = _report(_HandReset)
    assert "past pinned" not in said
    assert "passing over" not in said
