"""A fork that leaves out the partial last block, a copy decided by the first block's count or
taken from the free list's right end, and a free that skips blocks three tables hold are named,
each on its replay, on the real slip graded end to end; a slip whose first differing call looks
the same but whose replay differs gets no such sentence."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import Slot
from unlisted import blocks_counts, blocks_fork

Forking = checkpoint("block-manager", 3)


def _hint(impl: Any, step: int = 3) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("block-manager", impl, step)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _ForkDropsLastBlock(Forking):  # type: ignore[misc]
    """The child gets every block of the parent but the last, full or not."""

    def fork(self, parent: int, child: int) -> None:
        table = self.tables[parent][:-1]
        for block in table:
            self.ref[block] += 1
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]


class _CopyDecidedByAnyBlock(Forking):  # type: ignore[misc]
    """Copies a partial last block whenever any block of the table is shared."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif any(self.ref[b] > 1 for b in table):
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


def test_a_fork_that_leaves_out_the_partial_block_is_named() -> None:
    hint = _hint(blocks_fork.ForkDropsPartialTail)
    assert "full blocks [0] only, leaving out its partial last block 1" in hint
    assert "the child gets every block" in hint


def test_a_fork_that_drops_the_last_block_whatever_it_holds_is_not_said_to_keep_full_ones() -> None:
    hint = _hint(_ForkDropsLastBlock)
    assert "leaving out its partial last block" not in hint
    assert "the child gets every block" not in hint


def test_a_copy_decided_by_the_first_block_is_named() -> None:
    hint = _hint(blocks_fork.CopyDecidedByTheFirstBlock)
    assert "yours decides by block 0's refcount" in hint
    assert "the table's first block" in hint


def test_a_copy_decided_by_any_shared_block_is_not_said_to_read_the_first() -> None:
    hint = _hint(_CopyDecidedByAnyBlock)
    assert "decides by block" not in hint


def test_a_free_that_skips_blocks_three_tables_hold_is_named_with_its_counts() -> None:
    hint = _hint(blocks_fork.FreeHandlesTwoHolders)
    assert "frees it at 1, drops it by one at 2, and leaves it at 3 and 4" in hint
    assert "held by at most 2 tables" in hint


def test_a_free_that_skips_every_shared_block_gets_no_count_threshold() -> None:
    hint = _hint(blocks_counts.FreeLeavesSharedBlocks)
    assert "held by at most" not in hint


class _CopyReadsTheRightEnd(Forking):  # type: ignore[misc]
    """The copy is the free list's right-end block, read and counted but left on the list."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self.free[-1]
            self.ref[new] = 1
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


def test_a_copy_taken_from_the_right_end_is_named() -> None:
    hint = _hint(blocks_fork.CopyTakenFromTheRight)
    assert "yours took block 2 for the copy of shared block 0: the right end" in hint


def test_a_copy_left_on_the_free_list_is_not_said_to_be_taken_from_its_right_end() -> None:
    hint = _hint(_CopyReadsTheRightEnd)
    assert "for the copy of shared block" not in hint


class _ForkRaisesOnlyUnshared(Forking):  # type: ignore[misc]
    """A block held once goes to 2; one already shared keeps its count."""

    def fork(self, parent: int, child: int) -> None:
        table = self.tables[parent]
        for block in table:
            if self.ref[block] == 1:
                self.ref[block] = 2
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]


def test_a_fork_whose_counts_depend_on_the_count_before_shows_them() -> None:
    hint = _hint(_ForkRaisesOnlyUnshared)
    assert "set to 1, 2, 3 or 4 first, leaves it at 2, 2, 3 or 4" in hint


def test_a_fork_that_leaves_one_block_uncounted_gets_no_counts_by_start() -> None:
    hint = _hint(blocks_counts.ForkCountsTheFullBlocks)
    assert "first, leaves it at" not in hint
