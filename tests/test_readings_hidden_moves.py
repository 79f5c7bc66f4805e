"""Readings that name what only a later read shows, or what a returned number counts: a SIEVE
pin or unpin that moved its key (found by a second localisation that reads the queue), an LFU
tick that went back (the program watched on the learner's class) or that a hit did not
advance, a pin()/unpin() that returned a count over the whole cache, and a hit left at the
least recently used end. Each is kept on a real slip graded end to end and held back on a
look-alike whose report must not say it."""

from __future__ import annotations

import heapq
from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from unlisted.policies_heap import PutTakesNoTick
from unlisted.policies_moves import (
    REMOVALS,
    LFUHitOnSameTick,
    LFUTickWrapsAt1000,
    SIEVEPinToNewest,
    SIEVEUnpinToOldest,
)
from unlisted.weights_returns import (
    HitToLeastRecent,
    PinnedHitKeepsPlace,
    PinReturnsKeysPinned,
    UnpinReturnsPinsLeftEverywhere,
)

WENT_BACK = "your tick went back"
SAME_TICK = "advance the clock before recording it"
WHOLE = "not a count over the whole cache"
LEAST = "to the least recently used end"
PINNED_HIT = "it is pinned, and a hit of yours on"


class _SIEVEPinDropsBit(REMOVALS["SIEVE"]):  # type: ignore[misc]
    """A pin that clears the key's bit and moves nothing."""

    def update_on_pin(self, key: Any) -> None:
        self.pinned.add(key)
        self.visited[key] = False


class _LFUHitKeepsTick(checkpoint("eviction-policy", 1)):  # type: ignore[misc]
    """A hit advances the clock but leaves `reached` at the put's tick."""

    def update_on_hit(self, key: Any) -> None:
        self.clock += 1
        self.count[key] += 1
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))


class _PinCountsOnlyOne(checkpoint("weight-cache", 4)):  # type: ignore[misc]
    """Returns the number of keys pinned, which one resident key alone cannot tell from an
    off by one: the probe of the counts pins a second key beside it."""

    def pin(self, key: Any) -> int:
        super().pin(key)
        return len(self._pins)


class _UnpinReturnsFlag(checkpoint("weight-cache", 3)):  # type: ignore[misc]
    def unpin(self, key: Any) -> Any:
        return super().unpin(key) > 0


class _GetNeverRefreshes(checkpoint("weight-cache", 3)):  # type: ignore[misc]
    def get(self, key: Any) -> Any:
        return self._entries[key][1] if key in self._entries else None


def test_a_sieve_pin_or_unpin_that_moves_its_key_says_to_which_end() -> None:
    report, _ = failing_report("eviction-policy", {**REMOVALS, "SIEVE": SIEVEPinToNewest}, 3)
    assert "start at your `SIEVE.update_on_pin`" in report.hint, report.hint
    assert "to the newest end of the queue" in report.hint, report.hint
    report, _ = failing_report("eviction-policy", {**REMOVALS, "SIEVE": SIEVEUnpinToOldest}, 3)
    assert "start at your `SIEVE.update_on_unpin`" in report.hint, report.hint
    assert "to the oldest end of the queue" in report.hint, report.hint
    report, _ = failing_report("eviction-policy", {**REMOVALS, "SIEVE": _SIEVEPinDropsBit}, 3)
    assert "end of the queue" not in report.hint, report.hint


def test_a_tick_that_wraps_is_said_where_the_recorded_tick_went_back() -> None:
    report, _ = failing_report("eviction-policy", LFUTickWrapsAt1000, 2)
    assert "start at your `update_on_put`" in report.hint, report.hint
    assert WENT_BACK in report.hint and "the reference records 1000 there" in report.hint
    report, _ = failing_report("eviction-policy", PutTakesNoTick, 1)  # a tick not fresh
    assert "start at your `update_on_put`" in report.hint, report.hint
    assert WENT_BACK not in report.hint, report.hint


def test_a_hit_on_the_last_tick_is_told_apart_from_a_tick_left_at_the_put() -> None:
    report, _ = failing_report("eviction-policy", LFUHitOnSameTick, 1)
    assert "start at your `update_on_hit`" in report.hint and SAME_TICK in report.hint
    report, _ = failing_report("eviction-policy", _LFUHitKeepsTick, 1)
    assert SAME_TICK not in report.hint, report.hint
    assert "where it reached its old count" in report.hint, report.hint


def test_a_returned_count_over_the_cache_is_said_only_where_other_states_confirm_it() -> None:
    report, _ = failing_report("weight-cache", PinReturnsKeysPinned, 3)
    assert "the number of keys pinned" in report.hint and WHOLE in report.hint, report.hint
    report, _ = failing_report("weight-cache", UnpinReturnsPinsLeftEverywhere, 3)
    assert "the pins of every key together" in report.hint, report.hint
    # a count of the keys pinned is told once a second key is pinned (the probe of the counts
    # pins one beside it); a flag is no count at all
    report, _ = failing_report("weight-cache", _PinCountsOnlyOne, 4)
    assert "the number of keys pinned" in report.hint and WHOLE in report.hint, report.hint
    report, _ = failing_report("weight-cache", _UnpinReturnsFlag, 3)
    assert WHOLE not in report.hint, report.hint


def test_a_hit_sent_to_the_wrong_end_or_kept_while_pinned_is_named_a_plain_miss_not() -> None:
    report, _ = failing_report("weight-cache", HitToLeastRecent, 1)
    assert "start at your `get`" in report.hint and LEAST in report.hint, report.hint
    report, _ = failing_report("weight-cache", PinnedHitKeepsPlace, 3)
    assert PINNED_HIT in report.hint, report.hint
    report, _ = failing_report("weight-cache", _GetNeverRefreshes, 3)
    assert LEAST not in report.hint and PINNED_HIT not in report.hint, report.hint


class _SIEVEStartsAtNewest(checkpoint("eviction-policy", 4)["SIEVE"]):  # type: ignore[misc]
    """With no hand, the sweep starts at the newest key (then goes the right way)."""

    def pop_victim(self) -> Any:
        if self.hand is None and self.queue:
            self.hand = self.queue[-1]
        return super().pop_victim()


class _SIEVESweepsBackwards(checkpoint("eviction-policy", 4)["SIEVE"]):  # type: ignore[misc]
    """Sweeps from the newest key towards older ones, wrapping to the newest."""

    def pop_victim(self) -> Any:
        from servelab.weights.policies import NoVictim

        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = len(self.queue) - 1 if self.hand is None else self.queue.index(self.hand)
        while True:
            key = self.queue[i % len(self.queue)]
            if key in self.pinned:
                i -= 1
            elif self.visited[key]:
                self.visited[key] = False
                i -= 1
            else:
                self.hand = key
                self.update_on_remove(key)
                return key


def test_a_sweep_that_starts_at_the_newest_is_told_apart_from_one_that_goes_backwards() -> None:
    final = checkpoint("eviction-policy", 4)
    start = "yours starts its sweep at the newest key"
    report, _ = failing_report("eviction-policy", {**final, "SIEVE": _SIEVEStartsAtNewest}, 4)
    assert "start at your `SIEVE.pop_victim`" in report.hint and start in report.hint
    assert "wrong way" not in report.hint, report.hint
    report, _ = failing_report("eviction-policy", {**final, "SIEVE": _SIEVESweepsBackwards}, 4)
    assert start not in report.hint, report.hint
