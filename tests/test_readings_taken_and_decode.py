"""The order a block manager hands blocks out and lists them in, and the hash a decode gives
the block it fills (which no field shows): each sentence is shown on a real slip graded end to
end where its proof holds, and kept back from a look-alike where it does not."""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.readings.block_manager_taken import taken_order_reading
from servelab.grading.readings.difference import Difference
from servelab.kv.blocks import OutOfBlocks
from unlisted import blocks_taken, prefix_decode

B1 = checkpoint("block-manager", 1)


def _hint(module: Any, name: str) -> str:
    step, impl, _ = module.MISTAKES[name]
    return failing_report(module.TOPIC, impl, step)[0].hint


def test_an_alloc_that_reuses_freed_blocks_first_shows_the_order_it_hands_out() -> None:
    hint = _hint(blocks_taken, "freed blocks reused first")
    assert hint.startswith("start at your `_alloc`: yours, called again on a copy")
    assert "hands out [0, 1], where the free list is [1, 0]" in hint
    assert "one less than the reference's" not in hint


def test_a_table_built_back_to_front_is_read_as_the_reverse_order() -> None:
    hint = _hint(blocks_taken, "table built back to front")
    assert "lists them as [2, 1, 0], the reverse of the order they leave the free list" in hint


def test_blocks_taken_from_the_right_end_are_read_as_that_end() -> None:
    hint = _hint(blocks_taken, "blocks taken from the freed end")
    assert "yours took [1], the right end of the free list [0, 1]" in hint


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("table built back to front", None),
        ("freed blocks reused first", None),
        ("copy writes at the start", "yours gave the token offset 0 of block 2; its position is 6"),
    ],
)
def test_a_token_offset_sentence_only_where_the_block_is_the_same(
    name: str, said: str | None
) -> None:
    hint = _hint(blocks_taken, name)
    if said is None:
        assert "so its offset is" not in hint
        assert "the right end of the free list [" not in hint
    else:
        assert said in hint
        assert "so its offset is 6 % 4 = 2 (a copy holds the shared block's tokens" in hint


def _alloc_difference(obj: Any, mine: int, theirs: int) -> Difference:
    free = list(obj.free_list())
    return Difference(
        "_alloc",
        "",
        (),
        {"free": free, "refcounts": {}},
        {"free": [b for b in free if b != mine], "refcounts": {mine: 1}},
        {"free": [b for b in free if b != theirs], "refcounts": {theirs: 1}},
        f"returned {mine}",
        f"returned {theirs}",
        obj,
    )


def _freed(impl: type) -> Any:
    """Five blocks of one token: three taken and freed tail first, free list [3, 4, 2, 1, 0]."""
    bm = impl(5, 1)
    bm.allocate(0, 3)
    bm.free_seq(0)
    return bm


def test_freed_blocks_handed_out_first_in_freed_order_are_read_as_the_right_end() -> None:
    bm = _freed(blocks_taken.FreedBlocksReusedFirst)
    said = taken_order_reading(_alloc_difference(bm, 2, 3))
    assert said is not None
    assert "hands out [2, 1, 0, 3, 4], where the free list is [3, 4, 2, 1, 0]" in said
    assert "first [2, 1, 0], the right end of the free list" in said
    assert "reverse" not in said


class _PopsTheRight(B1):  # type: ignore[misc]
    """_alloc pops the right end of the free list: the list handed out backwards."""

    def _alloc(self) -> int:
        block = self.free.pop()
        self.ref[block] = 1
        return int(block)


def test_a_free_list_handed_out_backwards_is_not_read_as_freed_order() -> None:
    bm = _freed(_PopsTheRight)
    free = list(bm.free_list())
    said = taken_order_reading(_alloc_difference(bm, free[-1], free[0]))
    assert said is not None, free
    assert "the free list taken from its right end (pop)" in said
    assert "in the order they were put there" not in said


def test_an_alloc_that_hands_out_the_left_end_gets_no_order_sentence() -> None:
    bm = _freed(B1)
    assert taken_order_reading(_alloc_difference(bm, 3, 4)) is None


def test_a_decode_over_a_parent_with_no_hash_shows_the_call_and_the_none_it_chained_on() -> None:
    hint = _hint(prefix_decode, "decode hashes over None")
    assert "the 2nd `bm.append_slot(1, 3)` fills block 2 with (3, 3)" in hint
    assert "yours hashed block 2 as hash((None, (3, 3))), over that missing hash" in hint


def test_a_decode_chained_on_another_block_names_that_block_not_none() -> None:
    hint = _hint(prefix_decode, "decode chains on the first block")
    assert "`bm.append_slot(0, 6)` fills block 2 with (5, 6)" in hint
    assert "over block 0's hash, but its parent is block 1" in hint
    assert "None" not in hint


@pytest.mark.parametrize("unsaid", ["hash((None", "over block", "over that missing hash"])
def test_a_decode_hash_of_no_cause_seen_shows_the_place_and_no_cause(unsaid: str) -> None:
    hint = _hint(prefix_decode, "decode hash off by one")
    assert "the 2nd `bm.append_slot(1, 3)` fills block 2 with (3, 3)" in hint
    assert "block 1 before it in sequence 1's table has no hash" in hint
    assert unsaid not in hint


class _PlainFreeFromTheRight(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """Step 3's _alloc takes plain free blocks from the right end of the free list."""

    def _alloc(self) -> int:
        if self.free:
            block = self.free.pop()
        elif self.evictable_lru:
            block, _ = self.evictable_lru.popitem(last=False)
            self._forget(block)
        else:
            raise OutOfBlocks("no free block")
        self.ref[block] = 1
        return int(block)


def test_a_plain_free_block_taken_from_the_right_is_caught_and_not_read_as_reclaim() -> None:
    report = failing_report("prefix-cache", _PlainFreeFromTheRight, 3)[0]
    assert "✗ step 3 · a new block leaves the plain free list from the left" in report.text
    assert "hands out [3, 2, 1, 0], where the free list is [0, 1, 2, 3]" in report.hint
    assert "reclaim a cached one" not in report.hint
