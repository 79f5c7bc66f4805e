"""Weight-cache and eviction-policy readings that say what yours did only where the call's
own fields show it or a second call on a copy proves it: each seen on a slip with that
cause, and kept silent on a look-alike whose first differing call meets the same condition."""

from __future__ import annotations

import copy
from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.readings import Difference
from servelab.grading.readings.kinds import kind_reading
from servelab.weights import EntryPinned, EntryTooLarge, PinnedCapacityExceeded
from servelab.weights.policies import NoVictim
from unlisted import policies, weights

W = "weight-cache"
P = "eviction-policy"
LFU = checkpoint(P, 4)["LFU"]
SIEVE = checkpoint(P, 4)["SIEVE"]
REMOVALS = checkpoint(P, 3)["SIEVE"]


def _hint(topic: str, impl: Any, step: int) -> str:
    report, _ = failing_report(topic, impl, step)
    return str(report.hint)


class _VictimNewest(checkpoint(W, 2)):  # type: ignore[misc]
    """The newest entry goes (an MRU)."""

    def _next_victim(self):
        return next(reversed(self._entries))


class _VictimFirstByName(checkpoint(W, 2)):  # type: ignore[misc]
    """The key first by name goes: on the failing call it is also the newest."""

    def _next_victim(self):
        return min(self._entries)


def test_a_victim_is_called_the_newest_only_where_a_reversed_copy_takes_the_newest_again() -> None:
    assert "the most recently used" in _hint(W, _VictimNewest, 2)
    said = _hint(W, _VictimFirstByName, 2)
    assert "yours chose 'a'" in said and "most recently used" not in said


class _LargestTiesNewest(checkpoint(W, 3)):  # type: ignore[misc]
    """The largest unpinned entry goes, ties to the newest (a stable sort's last): among
    equal sizes it takes the newest on a reversed copy too, but not where sizes differ."""

    def _next_victim(self):
        unpinned = [k for k in self._entries if not self._pins.get(k)]
        return sorted(unpinned, key=lambda k: self._entries[k][0])[-1] if unpinned else None


def test_a_victim_is_called_the_newest_only_where_copies_with_sizes_moved_agree() -> None:
    said = _hint(W, _LargestTiesNewest, 3)
    assert "yours chose 'e' (20 bytes), the reference 'a' (20 bytes)" in said, said
    assert "recently used entry" not in said, said
    assert "the most recently used entry" in _hint(W, _VictimNewest, 2)


class _EvictKeepsEntry(checkpoint(W, 2)):  # type: ignore[misc]
    """Lowers `used` by the victim's size but never removes the entry."""

    def _evict(self, key):
        self._used -= self._entries[key][0]


def test_an_eviction_that_keeps_its_victim_says_so_not_the_loop_hint() -> None:
    said = _hint(W, _EvictKeepsEntry, 2)
    assert "left 'a' resident" in said and "exactly one is not enough" not in said


class _GetReturnsPair(checkpoint(W, 1)):  # type: ignore[misc]
    def get(self, key):
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key]


class _GetReturnsSize(checkpoint(W, 1)):  # type: ignore[misc]
    def get(self, key):
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key][0]


def test_a_get_that_answers_the_stored_pair_is_told_so() -> None:
    assert "the stored pair of size and value" in _hint(W, _GetReturnsPair, 1)
    assert "stored pair" not in _hint(W, _GetReturnsSize, 1)


class _FirstPinCountsTwo(checkpoint(W, 3)):  # type: ignore[misc]
    def pin(self, key):
        self._pins[key] = self._pins.get(key, 1) + 1
        return self._pins[key]


class _UnpinDropsAll(checkpoint(W, 3)):  # type: ignore[misc]
    def unpin(self, key):
        del self._pins[key]
        return 0


class _PinsAsSet(checkpoint(W, 3)):  # type: ignore[misc]
    """A second pin of a pinned key records nothing more."""

    def pin(self, key):
        self._pins[key] = 1
        return 1


def test_pin_counts_say_a_first_pin_above_one_and_every_pin_gone_at_once() -> None:
    assert "recorded 2 pins for the first pin of 'a'" in _hint(W, _FirstPinCountsTwo, 3)
    assert "every pin of 'a' away at once" in _hint(W, _UnpinDropsAll, 3)
    said = _hint(W, _PinsAsSet, 3)
    assert "first pin" not in said and "at once" not in said


def _checked(pinned_bytes: Any) -> type:
    class Checked(checkpoint(W, 4)):  # type: ignore[misc]
        def _check_can_admit(self, key, size):
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError("size")
            if size > self.capacity:
                raise EntryTooLarge("too large")
            if self._pins.get(key):
                raise EntryPinned("pinned")
            if size > self.capacity - pinned_bytes(self):
                raise PinnedCapacityExceeded(f"pinned: {list(self._pins)}")

    return Checked


def test_pins_weighed_as_bytes_are_told_only_where_the_edge_moves_with_the_pin_count() -> None:
    by_count = _checked(lambda c: sum(c._pins.values()))
    said = _hint(W, by_count, 4)
    assert "the capacity less the pin counts (2)" in said
    ignored = _checked(lambda c: 0)  # another cause: no pinned bytes at all
    assert "pin counts" not in _hint(W, ignored, 4)


class _ReplaceSignsSwapped(checkpoint(W, 1)):  # type: ignore[misc]
    def put(self, key, value, size):
        if key in self._entries:
            old, _ = self._entries.pop(key)
            self._entries[key] = (size, value)
            self._used += old - size
            return
        self._entries[key] = (size, value)
        self._used += size


def test_a_replacement_is_said_to_swap_the_signs_only_where_a_second_size_agrees() -> None:
    assert "the signs swapped" in _hint(W, _ReplaceSignsSwapped, 1)
    assert "signs swapped" not in _hint(W, weights.ReplaceKeepsOldSize, 2)


class _PinMovesOldest(REMOVALS):  # type: ignore[misc]
    def update_on_pin(self, key):
        self.pinned.add(key)
        self.queue.remove(key)
        self.queue.insert(0, key)


class _UnpinRequeues(REMOVALS):  # type: ignore[misc]
    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.queue.remove(key)
        self.queue.append(key)


class _PinClearsBit(REMOVALS):  # type: ignore[misc]
    def update_on_pin(self, key):
        self.pinned.add(key)
        self.visited[key] = False


def _removals(sieve: type) -> dict[str, type]:
    return {"LFU": checkpoint(P, 3)["LFU"], "SIEVE": sieve}


def test_step_three_places_a_pin_or_unpin_that_moves_a_key() -> None:
    # step 3 does not observe the queue (a finished class graded at step 3 must compare with
    # the step-3 reference field for field), so the place is found by the hybrids alone; the
    # call that moved the key, by a second localisation that reads the queue
    said = _hint(P, _removals(_PinMovesOldest), 3)
    assert "start at your `SIEVE.update_on_pin`" in said
    assert "moved 'b' to the oldest end of the queue" in said
    report, _ = failing_report(P, _removals(_UnpinRequeues), 3)  # caught; not placed
    assert "✗ step 3" in report.text
    assert "moved keys in the queue" not in _hint(P, _removals(_PinClearsBit), 3)


class _RemoveWrapsModulo(REMOVALS):  # type: ignore[misc]
    def update_on_remove(self, key):
        i = self.queue.index(key)
        if self.hand == key:
            self.hand = self.queue[(i + 1) % len(self.queue)]
            if self.hand == key:
                self.hand = None
        del self.queue[i]
        del self.visited[key]
        self.pinned.discard(key)


def test_a_hand_wrapped_to_the_oldest_key_is_told_it_rests_at_none() -> None:
    said = _hint(P, _removals(_RemoveWrapsModulo), 3)
    assert "yours set the hand to 'a', the oldest key" in said


def _sieve(pop: Any) -> dict[str, type]:
    return {"LFU": LFU, "SIEVE": type("Sweep", (SIEVE,), {"pop_victim": pop})}


def _pop(set_hand: bool, wrap_late: bool = False) -> Any:
    def pop_victim(self: Any) -> Any:
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if not wrap_late and i == len(self.queue):
                i = 0
            key = self.queue[i]  # with wrap_late: read before the wrap test
            if wrap_late and i == len(self.queue):
                i = 0
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                if set_hand:
                    self.hand = key
                self.update_on_remove(key)
                return key

    return pop_victim


def test_a_hand_never_set_is_told_so_and_a_sweep_error_gets_no_pins_hint() -> None:
    said = _hint(P, _sieve(_pop(set_hand=False)), 4)
    assert "left the hand at None, where the sweep began" in said
    assert "where the sweep began" not in _hint(
        P, _sieve(policies.SIEVESweepOneTooFar.pop_victim), 4
    )
    raised = _hint(P, _sieve(_pop(set_hand=True, wrap_late=True)), 4)
    assert "IndexError" in raised and "This check was written for" not in raised


class _LenUnvisited(SIEVE):  # type: ignore[misc]
    def __len__(self):
        return sum(1 for k in self.queue if k not in self.pinned and not self.visited[k])


def test_a_len_below_the_candidates_says_the_visited_ones_only_where_a_cleared_copy_agrees() -> (
    None
):
    said = _hint(P, {"LFU": LFU, "SIEVE": _LenUnvisited}, 4)
    assert "leaves out the visited ones" in said and "the reference changes it" not in said
    short = _hint(P, {"LFU": LFU, "SIEVE": policies.SIEVELenOneShort}, 4)
    assert "visited ones" not in short


class _Count:
    def __init__(self, count: int, step: Any) -> None:
        self.count, self.step = count, step

    def hit(self) -> None:
        self.count = self.step(self.count)


def _moved(step: Any) -> Any:
    d = Difference(
        "hit",
        "",
        (),
        {"n": 2},
        {"n": 1},
        {"n": 3},
        "returned None",
        "returned None",
        _Count(2, step),
        fields=lambda c: {"n": c.count},
    )
    return kind_reading(d)


def test_the_other_way_is_a_sign_only_where_a_second_call_moves_it_the_wrong_way_again() -> None:
    sign = _moved(lambda n: n - 1)
    assert sign is not None and "again on a second call: - where + belongs" in sign
    reset = _moved(lambda n: 1)  # lands on the same number once, then stays
    assert reset is not None and "the same step the other way" in reset
    assert "belongs" not in reset


class _OrderReversed(SIEVE):  # type: ignore[misc]
    """The trial pops listed newest first: with two candidates, the queue's order."""

    def eviction_order(self):
        trial = copy.deepcopy(self)
        return [trial.pop_victim() for _ in range(len(trial))][::-1]


def test_an_order_is_called_the_queue_order_only_where_a_copy_at_rest_lists_it_so_again() -> None:
    said = _hint(P, {"LFU": LFU, "SIEVE": policies.SIEVEOrderIsQueue}, 4)
    assert "in queue order, oldest first" in said
    assert "queue order" not in _hint(P, {"LFU": LFU, "SIEVE": _OrderReversed}, 4)


class _PutClearsBits(REMOVALS):  # type: ignore[misc]
    def update_on_put(self, key, size):
        self.queue.append(key)
        self.visited = dict.fromkeys(self.queue, False)


def test_a_put_that_clears_other_bits_names_them() -> None:
    said = _hint(P, _removals(_PutClearsBits), 3)
    assert "yours cleared the visited bit of 'm0' on update_on_put('m1')" in said
