"""Prefix-cache readings say what the learner's code did only where a re-call shows it: each
account is kept on a real slip and held back on a look-alike whose first differing call matches."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from buggy_impls import failing_report, shown_hint
from servelab import checkpoint
from servelab.grading import load_topic
from servelab.grading.diagnose import HOOKS
from servelab.grading.mistakes import mistakes
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
    assert "for each hit on a block another sequence holds ([0]), and such a hit" in said, said


def test_the_room_look_alike_graded_end_to_end_gets_no_account_of_every_hit() -> None:
    report, _ = failing_report("prefix-cache", _RoomHeldOnly, 3)
    assert "start at your `_room`" in report.hint, report.hint
    assert "for every hit," not in report.hint, report.hint


class _DecodeNamesOnTheParentsHash(checkpoint("prefix-cache", 2)):  # type: ignore[misc]
    """Hashes a block decoding fills as ``_chain(tokens[:-1])[-1]``: the chain of the tokens
    before the new one ends at the block's parent, so it registers under a hash already cached."""

    def append_slot(self, seq: int, token_id: int) -> Any:
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            block_tokens = tuple(tokens[-self.block_size :])
            chain = self._chain(tokens[:-1])
            h = chain[-1][0] if chain else hash((0, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


def test_a_decode_block_left_uncached_is_told_as_what_your_register_call_did() -> None:
    never = next(m.impl for m in mistakes("prefix-cache") if m.name == "decode_never_cached")
    # left out of the catalogue, as a mistake nobody listed: the reading speaks, not the match
    undiagnosed = replace(load_topic("prefix-cache"), diagnose=lambda program, impl: None)
    report, program = failing_report(undiagnosed, never, 2)
    others = [m for m in mistakes("prefix-cache") if m.impl is not never]
    hint = shown_hint(HOOKS["prefix-cache"].explain(program, never, None, others), report)
    assert "yours did not register block" in hint, hint
    report, _ = failing_report("prefix-cache", _DecodeNamesOnTheParentsHash, 2)
    assert "start at your `append_slot`" in report.hint, report.hint
    assert "yours did not register" not in report.hint, report.hint
    assert "when decoding fills a block, cache it" not in report.hint, report.hint
    assert "is already cached under, so it stays private" in report.hint, report.hint
