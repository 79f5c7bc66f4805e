"""Weight-cache and eviction-policy readings stated from what the first diverging call shows,
each seen on a slip it was written for (tests/unlisted/) and kept silent on one it was not."""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from unlisted import policies, weights, weights_contract

W = "weight-cache"
P = "eviction-policy"
POLICIES = checkpoint(P, 4)


def _hint(topic: str, impl: Any, step: int) -> str:
    report, _ = failing_report(topic, impl, step)
    return str(report.hint)


class _EvictsTwo(checkpoint(W, 3)):  # type: ignore[misc]
    """Removes its key and the oldest other unpinned entry: two gone, not one for another."""

    def _evict(self, key):
        super()._evict(key)
        other = next((k for k in self._entries if not self._pins.get(k)), None)
        if other is not None:
            super()._evict(other)


class _UnpinNoPush(checkpoint(P, 2)):  # type: ignore[misc]
    """Takes the key out of `pinned` but pushes no heap entry back."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)


class _SweepNewestFirst(POLICIES["SIEVE"]):  # type: ignore[misc]
    """Sweeps from the newest key: an unvisited key is evicted, the wrong one."""

    def pop_victim(self):
        self.queue.reverse()
        try:
            return super().pop_victim()
        finally:
            self.queue.reverse()


SHOWN = [
    (W, weights.EvictPopsOldest, 3, "yours removed 'a', not 'b', the key it was called with"),
    (W, weights.EvictedBytesAssigned, 5, "where the reference adds it to the"),
    (W, weights_contract.PinnedBeforeBadSize, 4, "is not a positive int, a ValueError, tried"),
    (W, weights_contract.BoolSizeAccepted, 4, "yours accepted a size of True"),
    (W, weights.ScanStopsAtPinned, 3, "yours returned None though 'b' is resident and not"),
    (W, weights.LastUnpinDropsEntry, 3, "yours removed 'a' from the cache on unpin('a')"),
    (P, policies.LFUPopStopsAtStale, 2, "yours raised NoVictim with 3 candidate(s) left"),
    (P, policies.LFUUnpinCountsUse, 2, "yours changed the count of 'a' to 2 on update_on_unpin"),
    (W, weights.EvictKeepsLast, 2, "above the capacity 100, with 'a' still resident"),
    (
        P,
        {"LFU": POLICIES["LFU"], "SIEVE": policies.SIEVEOrderOneShort},
        4,
        "yours listed 1 of the 2 candidates",
    ),
    (P, policies.LFUPinReplacesSet, 2, "yours took 'a' out of `pinned` on update_on_pin('b')"),
    (P, policies.LFUUnpinKeepsPinned, 2, "yours left 'a' in `pinned` after update_on_unpin"),
    (
        P,
        {"LFU": POLICIES["LFU"], "SIEVE": policies.SIEVEOrderIsQueue},
        4,
        "yours listed the candidates in queue order",
    ),
    (
        P,
        {"LFU": POLICIES["LFU"], "SIEVE": policies.SIEVESweepStaysOnVisited},
        4,
        "whose visited bit was set",
    ),
]


@pytest.mark.parametrize(("topic", "impl", "step", "said"), SHOWN)
def test_a_reading_is_shown_on_the_slip_it_was_written_for(
    topic: str, impl: Any, step: int, said: str
) -> None:
    assert said in _hint(topic, impl, step)


NOT_SHOWN = [
    (W, _EvictsTwo, 3, "the key it was called with"),  # two removed: no other key for its own
    (W, weights.EvictionCountedTwiceForOldest, 5, "to `evictions`: each"),  # 2 is no size
    (W, weights.EvictSubtractsTwice, 2, "where the reference adds it"),
    (W, weights_contract.PinnedBytesBeforeKey, 4, "not a positive int"),  # a good size
    (W, weights.ReplaceKeepsOldSize, 2, "the key it was called with"),
    (W, weights.VictimSkipsOldest, 3, "returned None though"),  # another key, not None
    (W, weights.ReplaceEvictsWhileOldCounts, 2, "still resident"),  # it evicted too much
    (
        P,
        {"LFU": policies.LFUUnpinTicksAfterPinnedHit, "SIEVE": POLICIES["SIEVE"]},
        4,
        "changed the count",
    ),
    (W, weights.UnpinReturnsOldCount, 3, "from the cache on"),  # the entry stays
    (P, {"LFU": POLICIES["LFU"], "SIEVE": policies.SIEVEPopRaisesLookupError}, 4, "left (len"),
    (P, {"LFU": POLICIES["LFU"], "SIEVE": policies.SIEVEOrderIsQueue}, 4, "candidates (len()"),
    (P, policies.LFUPinResetsCount, 4, "out of `pinned`"),  # the pins are right
    (P, _UnpinNoPush, 2, "in `pinned` after"),  # unpinned, only the push is missing
    (
        P,
        {"LFU": POLICIES["LFU"], "SIEVE": policies.SIEVEOrderSharesBits},
        4,
        "queue order",
    ),
    (P, {"LFU": POLICIES["LFU"], "SIEVE": _SweepNewestFirst}, 4, "whose visited bit was set"),
]


@pytest.mark.parametrize(("topic", "impl", "step", "unsaid"), NOT_SHOWN)
def test_a_reading_is_not_shown_where_the_call_does_not_show_it(
    topic: str, impl: Any, step: int, unsaid: str
) -> None:
    assert unsaid not in _hint(topic, impl, step)


def test_a_step_3_sieve_whose_fields_differ_is_localised() -> None:
    # step 3's SIEVE has no eviction order: its replay compares the fields its checks read
    impl = {"LFU": checkpoint(P, 3)["LFU"], "SIEVE": policies.SIEVEUnpinMarksVisited}
    report, _ = failing_report(P, impl, 3)
    assert "SIEVE.update_on_unpin" in report.text
    assert "visited bit" in str(report.hint)


def test_a_put_that_stores_its_fields_swapped_is_not_asked_about_replacements() -> None:
    class Swapped(checkpoint(W, 1)):  # type: ignore[misc]
        def put(self, key, value, size):
            if key in self._entries:
                self._used -= self._entries.pop(key)[0]
            self._entries[key] = (value, size)
            self._used += size

    hint = _hint(W, Swapped, 1)
    assert "(size, value)" in hint and "replacement" not in hint
    assert "replacement of yours keep the old size" in _hint(W, weights.ReplaceKeepsOldSize, 2)
