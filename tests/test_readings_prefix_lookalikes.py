"""Prefix-cache readings say what the learner's code did only where a re-call shows it: each
account is kept on a real slip and held back on a look-alike whose first differing call matches."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.readings import Difference
from servelab.grading.readings.prefix_cache import prefix_cache_reading
from unlisted.prefix import RoomCountsHeldHits


class _RoomHeldOnly(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """The room test the wrong way round: subtracts the hits other sequences hold, not the
    evictable ones."""

    def _room(self, hits: list[int]) -> int:
        return int(self.num_free) - sum(1 for block in hits if self.ref[block] > 0)


def _room_call(impl: type) -> Any:
    """``_room([0])`` on a manager where block 0 is held and blocks 2 and 3 are evictable."""
    bm = impl(8, 2)
    bm.allocate(0, [1, 2, 3, 4, 9])
    bm.allocate(1, [5, 6, 7, 8, 9])
    bm.free_seq(1)
    before = {"num_free": bm.num_free}
    mine = f"returned {bm._room([0])}"
    theirs = f"returned {bm.num_free}"
    return prefix_cache_reading(
        Difference("_room", "", ([0],), before, before, before, mine, theirs, bm)
    )


def test_room_taken_for_every_hit_is_said_only_when_an_evictable_hit_takes_one_too() -> None:
    said = _room_call(RoomCountsHeldHits) or ""
    assert "yours takes one block of room for every hit, and" in said, said
    said = _room_call(_RoomHeldOnly) or ""
    assert "for every hit," not in said, said
    assert "for every hit on a block another sequence holds" in said, said


def test_the_room_look_alike_graded_end_to_end_gets_no_account_of_every_hit() -> None:
    report, _ = failing_report("prefix-cache", _RoomHeldOnly, 3)
    assert "start at your `_room`" in report.hint, report.hint
    assert "for every hit," not in report.hint, report.hint
