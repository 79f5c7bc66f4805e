"""Slips no graded program visited before: a weight cache's victim with every entry pinned
(step 4's check keeps every later put from asking), and what an LFU keeps in its heap at
step 1 (read only by step 2's pop_victim) or orders past a thousand ticks. Each is graded end
to end with its reading, beside a look-alike or a class of the same behaviour that must not
get it."""

from __future__ import annotations

import heapq
import io
import time

from buggy_impls import failing_report
from servelab import checkpoint, grade
from unlisted.policies_heap import (
    HitPushesOldTick,
    HitPushOnlyWhenPinned,
    OrderPackedIntoOneNumber,
    PutTakesNoTick,
)
from unlisted.weights_pins import VictimFallsBackToOldest, VictimNextWithoutDefault

COUNTS = checkpoint("eviction-policy", 1)


def test_a_victim_that_falls_back_to_a_pinned_key_is_named_at_step_3() -> None:
    report = failing_report("weight-cache", VictimFallsBackToOldest, 3)[0].text
    assert "✗ step 3 · every entry pinned: no victim" in report
    assert "cache._next_victim()  # 'a'" in report
    assert "where: the difference starts in your `_next_victim`" in report
    assert "yours chose 'a', a pinned entry" in report


def test_a_victim_search_that_raises_with_every_key_pinned_is_shown_raising() -> None:
    report = failing_report("weight-cache", VictimNextWithoutDefault, 3)[0].text
    assert "cache._next_victim() raised StopIteration with every resident entry pinned" in report
    assert "yours raised StopIteration" in report
    assert "returns None (not a pinned key, and no exception)" in report


def test_a_hit_that_pushes_nothing_is_told_by_the_entries_it_left() -> None:
    report = failing_report("eviction-policy", HitPushOnlyWhenPinned, 1)[0].text
    assert "✗ step 1 · each put and hit leaves a fresh heap entry" in report
    assert "p.heap holds no entry (2, 4, 'c')" in report
    assert "where: the difference is in your `update_on_hit`" in report
    assert "yours holds 1 entry for 'c' after 2 update_on_put/update_on_hit calls" in report
    assert "Does yours push before" not in report  # the question of a stale push: not this


def test_a_hit_that_pushes_a_stale_entry_is_not_told_it_pushed_none() -> None:
    report = failing_report("eviction-policy", HitPushesOldTick, 1)[0].text
    assert "[(1, 1, 'b'), (1, 2, 'a'), (1, 3, 'c'), (2, 3, 'c')])" in report
    assert "the heap entry it pushes (the heap on the last line holds no entry for 'c'" in report
    assert "holds 1 entry" not in report


def test_a_put_without_a_tick_is_named_by_the_tick_it_shares() -> None:
    report = failing_report("eviction-policy", PutTakesNoTick, 1)[0].text
    assert "'a' has count 1 at tick 0, as 'b' does" in report
    assert "where: the difference is in your `update_on_put`" in report
    assert "the count and tick 'b' has. Each put and each hit takes a fresh tick" in report
    assert "what differs is the heap" not in report


def test_an_order_packed_into_one_number_is_told_past_a_thousand_ticks() -> None:
    report = failing_report("eviction-policy", OrderPackedIntoOneNumber, 1)[0].text
    assert "✗ step 1 · the count decides past many ticks" in report
    assert "where: the difference is in your `eviction_order`" in report
    assert "sort by the pair (count, reached)" in report
    assert "break ties another way" not in report  # the general question: not this slip


class OrderTickModThousand(COUNTS):
    """eviction_order sorts by (count, reached % 1000), a tick kept in three digits: right
    until equal counts sit on both sides of tick 1000."""

    def eviction_order(self):
        candidates = [k for k in self.count if k not in self.pinned]
        return sorted(candidates, key=lambda k: (self.count[k], self.reached[k] % 1000))


def test_a_tick_cut_to_three_digits_is_caught_where_equal_counts_pass_a_thousand_ticks() -> None:
    report = failing_report("eviction-policy", OrderTickModThousand, 1)[0].text
    assert "✓ step 1 · the count decides past many ticks" in report
    assert "✗ step 1 · the tick decides equal counts past many ticks" in report
    assert "eviction_order() is ['c', 'b', 'd', 'a'], expected ['b', 'c', 'd', 'a']" in report
    assert "puts a key of a higher count first" not in report  # counts are kept here
    assert "where: the difference is in your `eviction_order`" in report


class ReachedKeptInThreeDigits(COUNTS):
    """update_on_put records the tick as clock % 1000 (pushing the full clock): eviction_order
    reads `reached`, so equal counts past tick 1000 come out of order."""

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = 1
        self.reached[key] = self.clock % 1000
        heapq.heappush(self.heap, (1, self.clock, key))


def test_a_tick_recorded_in_three_digits_is_not_said_to_differ_in_the_heap_alone() -> None:
    report = failing_report("eviction-policy", ReachedKeptInThreeDigits, 1)[0].text
    assert "✗ step 1 · the tick decides equal counts past many ticks" in report
    assert "start at your `update_on_put`" in report
    assert "yours recorded tick 0 for 'c' on a put" in report and "your tick went back" in report


class HitPopsItsOldEntry(COUNTS):
    """Look-alike of a hit that pushes nothing: it pushes, then heappops once to drop its
    own old entry, which takes another key's entry where that one is smaller."""

    def update_on_hit(self, key):
        super().update_on_hit(key)
        if key not in self.pinned:
            heapq.heappop(self.heap)


def test_a_hit_that_takes_another_keys_entry_out_is_told_so() -> None:
    report = failing_report("eviction-policy", HitPopsItsOldEntry, 1)[0].text
    assert "after p.update_on_hit('c'), p.heap holds no entry (1, 1, 'b')" in report
    assert "this hit of 'c' took 'b''s current entry (1, 1, 'b') out of it" in report
    assert "holds 1 entry" not in report and "fresh tick" not in report


class HitRemovesOwnOldEntry(COUNTS):
    """Pushes the fresh entry, then list.remove's its own old one: no heapify."""

    def update_on_hit(self, key):
        old = (self.count[key], self.reached[key], key)
        super().update_on_hit(key)
        if old in self.heap:
            self.heap.remove(old)


def test_a_heap_left_out_of_heap_order_is_told_so() -> None:
    report = failing_report("eviction-policy", HitRemovesOwnOldEntry, 1)[0].text
    assert "after p.update_on_hit('d'), p.heap is out of heap order" in report
    assert "what differs is the heap's order (the last line)" in report
    assert "holds no entry" not in report


class OrderDropsHotKeys(COUNTS):
    """Look-alike of a packed order: leaves out keys whose count reached 1000."""

    def eviction_order(self):
        candidates = [k for k in self.count if k not in self.pinned and self.count[k] < 1000]
        return sorted(candidates, key=lambda k: (self.count[k], self.reached[k]))


def test_an_order_that_drops_a_key_is_not_told_a_tick_outweighs_a_count() -> None:
    report = failing_report("eviction-policy", OrderDropsHotKeys, 1)[0].text
    assert "eviction_order() is ['b', 'a'], expected ['b', 'a', 'c']" in report
    assert "where: the difference is in your `eviction_order`" in report
    assert "single number" not in report and "higher count first" not in report


class HitTickOfTheEventBefore(COUNTS):
    """Records the clock before bumping it on a hit: ticks repeat across counts, never
    within one, so every order and every heap pop is the reference's."""

    def update_on_hit(self, key):
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))
        self.clock += 1


class EntryWithSequence(COUNTS):
    """Pushes (count, tick, seq, key): an extra field between the tick and the key."""

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (1, self.clock, len(self.heap), key))

    def update_on_hit(self, key):
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, len(self.heap), key))


def test_heaps_that_pop_as_the_reference_does_pass_step_1() -> None:
    for impl in (HitTickOfTheEventBefore, EntryWithSequence):
        assert grade("eviction-policy", impl, 1, out=io.StringIO(), quiet=True).passed


def test_the_new_probes_keep_a_passing_step_within_its_time() -> None:
    start = time.process_time()
    assert grade("eviction-policy", COUNTS, 1, out=io.StringIO(), quiet=True).passed
    assert time.process_time() - start < 3
    start = time.process_time()
    assert grade(
        "weight-cache", checkpoint("weight-cache", 3), 3, out=io.StringIO(), quiet=True
    ).passed
    assert time.process_time() - start < 3 * 3
