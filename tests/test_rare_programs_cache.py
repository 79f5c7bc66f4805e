"""Weight-cache and eviction-policy slips whose report once named nothing: a pop_victim that
never returns with pins, and a get that misses only keys never put. Each is graded end to end
with its named hint, beside a look-alike that must not get it."""

from __future__ import annotations

import heapq

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.policy_probes import no_victim_hang, pinned_passed_hang
from servelab.weights.policies import NoVictim

LFU = checkpoint("eviction-policy", 2)
FINAL = checkpoint("eviction-policy", 4)
CACHE = checkpoint("weight-cache", 5)


class LFUPopPushesPinnedBack(LFU):
    """Pushes a pinned key's current entry back onto the heap and pops again: the same entry
    comes straight back, for ever."""

    def pop_victim(self):
        while self.heap:
            count, reached, key = heapq.heappop(self.heap)
            if (self.count.get(key), self.reached.get(key)) != (count, reached):
                continue
            if key in self.pinned:
                heapq.heappush(self.heap, (count, reached, key))
                continue
            self.update_on_remove(key)
            return key
        raise NoVictim("every resident key is pinned")


class SIEVESweepWithoutGuard(FINAL["SIEVE"]):
    """No len() test before the sweep: with every key pinned it goes round for ever."""

    def pop_victim(self):
        if not self.queue:
            raise NoVictim("empty")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
            key = self.queue[i]
            if key in self.pinned or self.visited[key]:
                self.visited[key] = False if key not in self.pinned else self.visited[key]
                i += 1
                continue
            self.hand = key
            self.update_on_remove(key)
            return key


class MissOnlyNeverPut(CACHE):
    """Counts a miss only for a key never put: a get of an evicted key counts nothing."""

    def put(self, key, value, size):
        self.__dict__.setdefault("seen", set()).add(key)
        return super().put(key, value, size)

    def get(self, key):
        if key not in self._entries and key in self.__dict__.get("seen", ()):
            return None
        return super().get(key)


class SeenKeyCountsHit(CACHE):
    """Look-alike: a get of a key put before (evicted since) counts a hit, not a miss."""

    def put(self, key, value, size):
        self.__dict__.setdefault("seen", set()).add(key)
        return super().put(key, value, size)

    def get(self, key):
        if key not in self._entries and key in self.__dict__.get("seen", ()):
            self.hits += 1
            return None
        return super().get(key)


def test_an_lfu_pop_that_pushes_pinned_entries_back_is_named() -> None:
    report = failing_report("eviction-policy", LFUPopPushesPinnedBack, 2)[0].text
    assert "✗ step 2 · pinned keys are not candidates" in report
    assert "`p.pop_victim()` did not return within" in report
    assert "yours never returned from pop_victim() with 'a' pinned" in report
    assert "pushes a pinned key's entry back onto the heap" in report


def test_a_sieve_sweep_without_a_guard_is_named_on_every_key_pinned() -> None:
    impl = {"LFU": FINAL["LFU"], "SIEVE": SIEVESweepWithoutGuard}
    report = failing_report("eviction-policy", impl, 4)[0].text
    assert "✗ step 4 · nothing to evict raises" in report
    assert "yours never returned from pop_victim() with every key pinned" in report
    assert "raise NoVictim before looking" in report


def test_a_hang_outside_pop_victim_keeps_the_general_hint() -> None:
    # The named hints speak of the pop; a program that hung on another line gets none.
    hung_on_pin = "p = LFU()\np.update_on_put('a', 1)\np.update_on_pin('a')"
    assert no_victim_hang(hung_on_pin) == ""
    assert pinned_passed_hang("LFU")(hung_on_pin) == ""
    assert pinned_passed_hang("SIEVE")(hung_on_pin + "\np.pop_victim()").startswith("yours")


def test_a_miss_counted_only_for_keys_never_put_is_named() -> None:
    report = failing_report("weight-cache", MissOnlyNeverPut, 5)[0].text
    assert "where: the difference starts in your `get`" in report
    assert "yours counts a miss for a key never put" in report
    assert "whether it was never put or was put and evicted since" in report


def test_a_seen_key_counted_as_a_hit_is_not_read_as_missed_only_when_never_put() -> None:
    report = failing_report("weight-cache", SeenKeyCountsHit, 5)[0].text
    assert "where: the difference starts in your `get`" in report
    assert "never put" not in report
    assert "counts one miss and no hit" in report


class LFUPinRemovesEntry(LFU):
    """Takes the pinned key's entry out of the heap with list.remove and no heapify."""

    def update_on_pin(self, key):
        super().update_on_pin(key)
        for entry in [e for e in self.heap if e[2] == key]:
            self.heap.remove(entry)


class LFUPinMovesLastIntoSlot(LFU):
    """Moves the heap's last entry into the pinned key's slot, with no sift."""

    def update_on_pin(self, key):
        super().update_on_pin(key)
        for i, entry in enumerate(self.heap):
            if entry[2] == key:
                self.heap[i] = self.heap[-1]
                self.heap.pop()
                break


class LFUPinHeapifiesButUnpinTicks(LFU):
    """Look-alike: the pin's removal keeps heap order (heapify), but the unpin takes a new
    tick, as a use: a wrong victim with the heap in order."""

    def update_on_pin(self, key):
        super().update_on_pin(key)
        self.heap = [e for e in self.heap if e[2] != key]
        heapq.heapify(self.heap)

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.clock += 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (self.count[key], self.clock, key))


def test_a_pin_that_leaves_the_heap_out_of_order_is_named() -> None:
    for slip in (LFUPinRemovesEntry, LFUPinMovesLastIntoSlot):
        report = failing_report("eviction-policy", slip, 2)[0].text
        assert "yours left `heap` out of heap order before this pop_victim()" in report, slip
        assert "with the list put back in order (heapq.heapify) evicts 'b'" in report
        assert "your `update_on_pin`" in report


def test_a_wrong_victim_with_the_heap_in_order_is_not_read_as_heap_order() -> None:
    report = failing_report("eviction-policy", LFUPinHeapifiesButUnpinTicks, 2)[0].text
    assert "heap order" not in report
    assert "update_on_unpin" in report


def test_the_heap_order_proof_holds_only_where_heapify_gives_the_victim() -> None:
    from servelab.grading.policy_probes import heap_order_broken

    right = LFU()
    for key in "abc":
        right.update_on_put(key, 1)
    assert not heap_order_broken(right, "a")
    broken = LFUPinRemovesEntry()
    for key in "abc":
        broken.update_on_put(key, 1)
    broken.update_on_pin("a")
    broken.update_on_unpin("a")
    broken.update_on_pin("a")
    assert heap_order_broken(broken, "b")
    assert not heap_order_broken(broken, "c")  # put back in order it pops 'b', not 'c'


class EvictedBytesOfLastVictim(CACHE):
    """Evicts in put's own loop (its _evict, called directly, counts as it should), adding
    the bytes once per put: the last victim's only."""

    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        last = 0
        while self._used + size > self.capacity:
            victim = self._next_victim()
            self.evictions += 1
            last = self._entries[victim][0]
            checkpoint("weight-cache", 3)._evict(self, victim)
        self.evicted_bytes += last
        self._entries[key] = (size, value)
        self._used += size


def test_evicted_bytes_of_one_victim_of_several_is_named_not_off_by_one() -> None:
    report = failing_report("weight-cache", EvictedBytesOfLastVictim, 5)[0].text
    assert "to `evicted_bytes` in this put, the size of" in report
    assert "alone; the put evicted" in report
    assert "off by one" not in report


class LFUPinnedHitKeepsTheClock(LFU):
    """Advances the clock on the unpinned path only: a hit while pinned takes the tick of the
    event before it, and ties with the key that event touched."""

    def update_on_hit(self, key):
        if key in self.pinned:
            self.count[key] += 1
            self.reached[key] = self.clock
            return
        super().update_on_hit(key)


class LFUHitPushesBeforeCounting(LFU):
    """Look-alike: an unpinned hit pushes the entry before raising the count (stale at once)."""

    def update_on_hit(self, key):
        self.clock += 1
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))
        self.count[key] += 1
        self.reached[key] = self.clock


def test_a_hit_while_pinned_without_its_own_tick_is_caught_and_named() -> None:
    report = failing_report("eviction-policy", LFUPinnedHitKeepsTheClock, 2)[0].text
    assert "✗ step 2 · a hit while pinned takes its own tick" in report
    assert "your `update_on_hit`" in report
    assert "the tick 'b' already has: advance the clock before recording it" in report
    assert "heap entry it pushes" not in report  # the reference pushes none for a pinned key


def test_an_unpinned_hit_pushing_a_stale_entry_keeps_the_heap_entry_reading() -> None:
    report = failing_report("eviction-policy", LFUHitPushesBeforeCounting, 2)[0].text
    assert "your `update_on_hit`" in report
    assert "was hit while pinned" not in report
