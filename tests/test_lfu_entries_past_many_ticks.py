"""Step 1 of eviction-policy reads LFU's heap entries past tick 4096 (a tick cut to its last
digits in the heap entry alone leaves `reached` right and the key never popped again), and
a removed key put again starts at count 1 (a count kept aside and resumed is caught)."""

from __future__ import annotations

import heapq
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade

ALONE = checkpoint("eviction-policy", 2)


def _report(impl: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("eviction-policy", impl, 2)
    return str(failed.value)


class _HeapTickModulo(ALONE):  # type: ignore[misc,valid-type]
    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (1, self.clock % 1000, key))

    def update_on_hit(self, key):
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock % 1000, key))


class _PutTickBits(ALONE):  # type: ignore[misc,valid-type]
    """The put's entry keeps the tick's last ten bits; hits are right."""

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (1, self.clock & 1023, key))


class _HeapTickSorted(ALONE):  # type: ignore[misc,valid-type]
    """Pushes the right entries with one extra field before the key: not a slip."""

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (1, self.clock, 0, key))

    def update_on_hit(self, key):
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, 0, key))

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        heapq.heappush(self.heap, (self.count[key], self.reached[key], 0, key))

    def pop_victim(self):
        from servelab.weights.policies import NoVictim

        while self.heap:
            count, reached, _, key = heapq.heappop(self.heap)
            current = (self.count.get(key), self.reached.get(key))
            if key not in self.pinned and current == (count, reached):
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")


class _RemembersCounts(ALONE):  # type: ignore[misc,valid-type]
    def __init__(self):
        super().__init__()
        self.old = {}

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = self.old.get(key, 0) + 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (self.count[key], self.clock, key))

    def update_on_remove(self, key):
        self.old[key] = self.count.pop(key)
        del self.reached[key]
        self.pinned.discard(key)


def test_a_heap_tick_cut_past_1000_is_caught_at_its_entry() -> None:
    said = _report(_HeapTickModulo)
    assert "✗ step 1 · each put and hit leaves a fresh heap entry past many ticks" in said
    assert "p.heap holds no entry (4100, 4100, 'a')" in said
    assert "# [(4100, 100, 'a')]" in said


def test_a_put_tick_cut_to_its_bits_is_caught_at_the_put() -> None:
    said = _report(_PutTickBits)
    assert "after p.update_on_put('b', 1), p.heap holds no entry (1, 4101, 'b')" in said


def test_full_ticks_with_an_extra_field_pass_the_probe() -> None:
    grade("eviction-policy", _HeapTickSorted, 2)


def test_a_count_resumed_after_removal_is_caught_by_the_forget_probe() -> None:
    said = _report(_RemembersCounts)
    assert "✗ step 1 · a removed key is forgotten" in said
    assert "expected ['a', 'b']" in said
