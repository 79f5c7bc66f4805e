"""A hit on a pinned entry is a use in the weight cache and the eviction policies too: a `get`
(or `update_on_hit`) that skips a pinned key fails its step, and the report points at that
method with the key pinned and says a hit counts while pinned. Graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade

Pinning = checkpoint("weight-cache", 3)
LFU = checkpoint("eviction-policy", 2)
S4 = checkpoint("eviction-policy", 4)


class GetSkipsPinned(Pinning):
    """get leaves a pinned model where it is in the LRU order."""

    def get(self, key: Any) -> Any:
        if key not in self._entries:
            return None
        if not self._pins.get(key):
            self._entries.move_to_end(key)
        return self._entries[key][1]


class LFUHitSkipsPinned(LFU):
    """A hit on a pinned key is not counted."""

    def update_on_hit(self, key: Any) -> None:
        if key not in self.pinned:
            super().update_on_hit(key)


class SieveHitSkipsPinned(S4["SIEVE"]):
    """A hit on a pinned key leaves its visited bit clear."""

    def update_on_hit(self, key: Any) -> None:
        if key not in self.pinned:
            super().update_on_hit(key)


def _report(topic: str, impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as info:
        grade(topic, impl, step, quiet=True)
    return str(info.value)


def test_a_weight_cache_get_that_skips_a_pinned_key_is_told() -> None:
    text = _report("weight-cache", GetSkipsPinned, 3)
    assert "the difference starts in your `get`" in text
    assert "pins {'a': 1}" in text
    assert "get refreshes a pinned key too" in text


def test_an_lfu_hit_on_a_pinned_key_is_counted() -> None:
    text = _report("eviction-policy", LFUHitSkipsPinned, 2)
    assert "the difference starts in your `update_on_hit`" in text
    assert "a hit counts while pinned too" in text


def test_a_sieve_hit_on_a_pinned_key_sets_its_bit() -> None:
    text = _report("eviction-policy", {**S4, "SIEVE": SieveHitSkipsPinned}, 4)
    assert "the difference starts in your `SIEVE.update_on_hit`" in text
    assert "a hit on a pinned key sets its visited bit too" in text


def test_the_checkpoints_pass() -> None:
    grade("weight-cache", Pinning, 3, quiet=True)
    grade("eviction-policy", LFU, 2, quiet=True)
    grade("eviction-policy", S4, 4, quiet=True)
