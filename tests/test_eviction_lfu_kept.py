"""An LFU that keeps what it should drop or pushes what it should not: a key put again after
it left starting from its old count, named where new policies of the learner's class resume
a count after a pop_victim or an update_on_remove; an unpin pushing an entry whose tick is
not the one its key reached its count at, named from the learner's own heap. Each beside a
look-alike where it must not be said."""

from __future__ import annotations

import heapq
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.weights.policies import NoVictim

TOPIC = "eviction-policy"
COUNTS, ALONE, FINAL = (checkpoint(TOPIC, s) for s in (1, 2, 4))


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step)
    return str(failed.value)


class _GhostOnEvict(FINAL["LFU"]):  # type: ignore[misc,valid-type]
    def __init__(self):
        super().__init__()
        self.ghost = {}

    def pop_victim(self):
        while self.heap:
            count, reached, key = heapq.heappop(self.heap)
            if key not in self.pinned and (self.count.get(key), self.reached.get(key)) == (
                count,
                reached,
            ):
                self.ghost[key] = count
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = self.ghost.pop(key, 0) + 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (self.count[key], self.clock, key))


class _PutAgainStartsAtTwo(FINAL["LFU"]):  # type: ignore[misc,valid-type]
    """A key seen before starts at 2, whatever its count was: nothing is resumed."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = 2 if key in self.seen else 1
        self.seen.add(key)
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (self.count[key], self.clock, key))


class _CountsSurviveRemove(COUNTS):  # type: ignore[misc,valid-type]
    def __init__(self):
        super().__init__()
        self.uses = {}

    def update_on_put(self, key, size):
        self.clock += 1
        self.uses[key] = self.uses.get(key, 0) + 1
        self.count[key] = self.uses[key]
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (self.count[key], self.clock, key))

    def update_on_hit(self, key):
        super().update_on_hit(key)
        self.uses[key] = self.count[key]


class _UnpinPushesClock(ALONE):  # type: ignore[misc,valid-type]
    def update_on_unpin(self, key):
        self.pinned.discard(key)
        heapq.heappush(self.heap, (self.count[key], self.clock, key))


class _UnpinPushesNothing(ALONE):  # type: ignore[misc,valid-type]
    """No entry at all on an unpin: nothing stale was pushed."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)


def test_a_count_resumed_after_an_eviction_is_named() -> None:
    said = _report({**FINAL, "LFU": _GhostOnEvict}, 4)
    assert "evicted by pop_victim, then put again starts at 4" in said
    assert "yours resumes the count a key had when it left" in said


def test_a_key_put_again_at_two_is_not_said_to_resume_a_count() -> None:
    assert "resumes the count" not in _report({**FINAL, "LFU": _PutAgainStartsAtTwo}, 4)


def test_a_count_resumed_after_a_removal_is_named_at_step_one() -> None:
    said = _report(_CountsSurviveRemove, 1)
    assert "removed, then put again starts at 4" in said and "pop_victim" not in said


def test_an_unpin_pushing_the_clock_is_named() -> None:
    said = _report(_UnpinPushesClock, 2)
    assert "on update_on_unpin('a'), but 'a' has count 2, reached at tick" in said
    assert "the clock now" in said and "skips yours as stale" in said


def test_an_unpin_pushing_nothing_is_not_said_to_push_a_stale_entry() -> None:
    assert "skips yours as stale" not in _report(_UnpinPushesNothing, 2)


class _StaleByCountOnly(ALONE):  # type: ignore[misc,valid-type]
    def pop_victim(self):
        while self.heap:
            count, _, key = heapq.heappop(self.heap)
            if key not in self.pinned and self.count.get(key) == count:
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")


class _HandOnVictim(FINAL["SIEVE"]):  # type: ignore[misc,valid-type]
    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.update_on_remove(key)
                self.hand = key
                return key


def test_a_stale_entry_taken_for_its_count_is_named() -> None:
    said = _report(_StaleByCountOnly, 2)
    assert "yours popped 'm0' through a stale heap entry, (1, 1, 'm0')" in said


class _PopsMostUsed(ALONE):  # type: ignore[misc,valid-type]
    """Takes the most used candidate, from the counts, not from the heap."""

    def pop_victim(self):
        candidates = [k for k in self.count if k not in self.pinned]
        if not candidates:
            raise NoVictim("every resident key is pinned")
        key = max(candidates, key=lambda k: (self.count[k], -self.reached[k]))
        self.update_on_remove(key)
        return key


def test_a_wrong_victim_taken_without_a_stale_entry_is_not_called_stale() -> None:
    assert "through a stale heap entry" not in _report(_PopsMostUsed, 2)


def test_a_hand_left_on_the_evicted_key_is_named() -> None:
    said = _report({**FINAL, "SIEVE": _HandOnVictim}, 4)
    assert "left the hand on 'b' itself, no longer in the queue" in said
