"""A hit on a held chunk is a use: a step-1 tier whose `get` skips the LRU refresh while the
chunk is pinned (or referenced) fails its step with the probe that reads, then releases, a
held chunk in a tier of three, and the report points at `get` with the pins it was called on.
The reference, and a tier that refreshes on every hit, pass that probe. Graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.kv_offload_held_use import held_get_is_a_use

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)


class NoRefreshWhilePinned(Pinned):
    """get leaves a pinned chunk where it is: it cannot be evicted while pinned anyway."""

    def get(self, key: str) -> Any:
        if key not in self._sizes:
            return None
        if self.policy == "LRU" and self.pin_count(key) == 0:
            self._sizes.move_to_end(key)
        return self._read(key)


class NoRefreshWhileHeld(Pinned):
    """get refreshes only a chunk that could be evicted now."""

    def get(self, key: str) -> Any:
        if key not in self._sizes:
            return None
        if self.policy == "LRU" and self.can_evict(key):
            self._sizes.move_to_end(key)
        return self._read(key)


class RefreshOnEveryHit(Pinned):
    """A look-alike that is right: get refreshes first, then reads."""

    def get(self, key: str) -> Any:
        if key in self._sizes and self.policy == "LRU":
            self._sizes.move_to_end(key)
        return None if key not in self._sizes else self._read(key)


def _report(cls: type) -> str:
    with pytest.raises(GradeFailure) as info:
        grade(TOPIC, cls, 1, quiet=True)
    return str(info.value)


@pytest.mark.parametrize("cls", [NoRefreshWhilePinned, NoRefreshWhileHeld])
def test_a_get_that_skips_a_held_chunk_fails_at_the_held_use_probe(cls: type) -> None:
    text = _report(cls)
    assert "✗ step 1 · a hit on a held chunk is a use" in text
    assert "after pin('a'), get('a'), unpin('a') is ['a', 'b', 'c'], expected ['b', 'c', 'a']" in (
        text
    )
    assert "the difference starts in your `get`" in text
    assert "pins {'a': 1}" in text
    assert "a `get` of a pinned or referenced chunk is a use too" in text


@pytest.mark.parametrize("cls", [Pinned, RefreshOnEveryHit])
def test_a_get_that_refreshes_every_hit_passes_the_probe(cls: type) -> None:
    held_get_is_a_use(cls)  # raises when the probe tells a difference
    grade(TOPIC, cls, 1, quiet=True)
