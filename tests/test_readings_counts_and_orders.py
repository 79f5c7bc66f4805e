"""Readings of how a call moves a refcount or an order, each proven on copies or read off the
call: every sentence below is shown on a real slip graded end to end, and kept back from a
look-alike whose first differing call is the same method, or gives the same numbers."""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, Slot
from unlisted import blocks_counts, blocks_taken, prefix_counts

BM, PC = "block-manager", "prefix-cache"
B1, B3 = checkpoint(BM, 1), checkpoint(BM, 3)
P2, P3 = checkpoint(PC, 2), checkpoint(PC, 3)


class _ForkNeverCounts(B3):  # type: ignore[misc]
    """Shares the parent's blocks without raising any refcount."""

    def fork(self, parent: int, child: int) -> None:
        self.tables[child] = list(self.tables[parent])
        self.lens[child] = self.lens[parent]


class _ForkSkipsTheFirst(B3):  # type: ignore[misc]
    """Raises every refcount of the parent's table but the first block's."""

    def fork(self, parent: int, child: int) -> None:
        table = self.tables[parent]
        for block in table[1:]:
            self.ref[block] += 1
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]


class _ClaimAddsTwo(P3):  # type: ignore[misc]
    """A hit raises the refcount by two."""

    def _claim(self, block: int) -> None:
        if self.ref[block] == 0:
            del self.evictable_lru[block]
        self.ref[block] += 2


class _ClaimTakesTheNewest(P3):  # type: ignore[misc]
    """Claiming an evictable hit pops the evictable LRU's newest entry, not the hit."""

    def _claim(self, block: int) -> None:
        if self.ref[block] == 0:
            self.evictable_lru.popitem(last=True)
        self.ref[block] += 1


class _ClaimRefreshes(P3):  # type: ignore[misc]
    """An evictable hit is moved to the newest end of the evictable LRU, not taken off it."""

    def _claim(self, block: int) -> None:
        if self.ref[block] == 0:
            self.evictable_lru.move_to_end(block)
        self.ref[block] += 1


class _FreeSkipsTheFirst(B3):  # type: ignore[misc]
    """free_seq releases every block of the table but its first."""

    def free_seq(self, seq: int) -> None:
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in reversed(table[1:]):
            self._release(block)


class _ChainNamedByTheParent(P2):  # type: ignore[misc]
    """Pairs each block with the name of the prefix before it (ROOT for the first)."""

    def _chain(self, tokens: list[int]) -> list[Any]:
        chain, parent = [], 0
        for i in range(len(tokens) // self.block_size):
            block_tokens = tuple(tokens[i * self.block_size : (i + 1) * self.block_size])
            chain.append((parent, block_tokens))
            parent = hash((parent, block_tokens))
        return chain


class _PopsTheRight(B1):  # type: ignore[misc]
    """_alloc pops the right end of the free list."""

    def _alloc(self) -> int:
        if not self.free:
            raise OutOfBlocks("no free block")
        block = self.free.pop()
        self.ref[block] = 1
        return int(block)


SETS = "whatever it was"
SAID: dict[str, tuple[Any, str, int, tuple[str, ...]]] = {
    "a fork that sets the count": (
        blocks_counts.ForkSetsTheCountToTwo,
        BM,
        3,
        (f"yours sets the count to 2 {SETS}", "leaves it at 2 each time"),
    ),
    "a hit that sets the count": (
        prefix_counts.ClaimSetsTheCountToOne,
        PC,
        3,
        (f"yours sets the count to 1 {SETS}", "a hit adds one holder"),
    ),
    "a fork that leaves the partial block": (
        blocks_counts.ForkCountsTheFullBlocks,
        BM,
        3,
        ("raised the refcounts of the full blocks [0] but left the partial last block 1",),
    ),
    "a free that skips shared blocks": (
        blocks_counts.FreeLeavesSharedBlocks,
        BM,
        3,
        ("which another table holds too", "where block 0's count is 1, it frees it"),
    ),
    "a hit that takes the oldest": (
        prefix_counts.ClaimTakesTheOldest,
        PC,
        3,
        ("took block 1, the oldest entry of the evictable LRU", "left the hit, block 0"),
    ),
    "a lookup that reorders": (
        prefix_counts.LookupRefreshesEvictable,
        PC,
        3,
        ("moved the evictable LRU from [1, 0] to [0, 1]", "a lookup only reads"),
    ),
    "a chain keyed by position": (
        prefix_counts.ChainKeyedByPosition,
        PC,
        2,
        ("yours names block 0 ", "each block's name is exactly hash((parent, block_tokens))"),
    ),
    "freed blocks handed out first": (
        blocks_taken.FreedBlocksReusedFirst,
        BM,
        1,
        (
            "on a new manager of 4 blocks whose blocks [0, 1] were held",
            "hands out [1, 0, 2, 3]: first [1, 0], the right end of the free list",
        ),
    ),
}


@pytest.mark.parametrize("name", list(SAID))
def test_the_sentence_is_shown_on_the_slip_it_was_proven_for(name: str) -> None:
    impl, topic, step, said = SAID[name]
    report, _ = failing_report(topic, impl, step)
    for words in said:
        assert words in report.hint, report.hint


UNSAID: dict[str, tuple[Any, str, int, tuple[str, ...]]] = {
    "a fork that never counts": (_ForkNeverCounts, BM, 3, (SETS, "partial last block")),
    "a fork that skips the first block": (_ForkSkipsTheFirst, BM, 3, (SETS, "partial last")),
    "a hit that adds two": (_ClaimAddsTwo, PC, 3, (SETS,)),
    "a hit that takes the newest": (_ClaimTakesTheNewest, PC, 3, ("the oldest entry",)),
    "a hit moved to the newest end": (_ClaimRefreshes, PC, 3, ("a lookup only reads",)),
    "a free that skips its first block": (_FreeSkipsTheFirst, BM, 3, ("another table holds",)),
    "a chain named by the parent": (_ChainNamedByTheParent, PC, 2, ("is exactly hash((",)),
    "a copy counted twice": (blocks_counts.CopyCountedTwice, BM, 3, ("the refcount the shared",)),
    "the free list popped from the right": (_PopsTheRight, BM, 1, ("in the order they were put",)),
}


@pytest.mark.parametrize("name", list(UNSAID))
def test_the_sentence_is_kept_back_from_a_look_alike(name: str) -> None:
    impl, topic, step, unsaid = UNSAID[name]
    report, _ = failing_report(topic, impl, step)
    for words in unsaid:
        assert words not in report.hint, report.hint


class _CopyTakesTheCount(B3):  # type: ignore[misc]
    """The copy takes the shared block's count; the shared block is released right."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self.ref[new] = self.ref[cow_src]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


def test_a_copy_that_takes_the_shared_count_is_told_apart_from_a_copy_counted_twice() -> None:
    taken, _ = failing_report(BM, _CopyTakesTheCount, 3)
    assert "the refcount the shared block 1 had before the call" in taken.hint, taken.hint
    twice, _ = failing_report(BM, blocks_counts.CopyCountedTwice, 3)
    assert "the refcount the shared" not in twice.hint, twice.hint
    assert "2" in twice.hint, twice.hint


def test_a_free_list_popped_from_the_right_is_read_on_a_new_manager_as_popped() -> None:
    report, _ = failing_report(BM, _PopsTheRight, 1)
    assert "the free list taken from its right end (pop)" in report.hint, report.hint
