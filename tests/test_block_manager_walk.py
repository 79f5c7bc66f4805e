"""A free_seq that takes entries out of the table while a loop walks that same list is told
so, proven on copies (the table shrinks mid-walk; a walk over a snapshot releases every block),
graded end to end whichever entries it takes out; a free_seq that skips blocks without
touching the table it walks gets no such sentence. An append_slot whose test for a new block
fails only with one-token blocks is told so, proven on fresh managers of other block sizes;
one that misses the boundary at every size is not."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import Slot

Allocating = checkpoint("block-manager", 1)
WALK = "takes entries out of the table while a loop walks that same list"


def _hint(impl: Any) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("block-manager", impl, 1)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _PopsHeadWhileWalking(Allocating):  # type: ignore[misc]
    """Takes the first entry off the table each turn of a loop over that table."""

    def free_seq(self, seq: int) -> None:
        table = self.tables[seq]
        for block in table:
            table.pop(0)
            self._release(block)
        del self.tables[seq]
        del self.lens[seq]


class _PopsTailWhileWalking(Allocating):  # type: ignore[misc]
    """Takes the last entry off the table each turn of a loop over that table."""

    def free_seq(self, seq: int) -> None:
        table = self.tables.pop(seq)
        for block in table:
            self._release(block)
            table.pop()
        del self.lens[seq]


class _SkipsEveryOther(Allocating):  # type: ignore[misc]
    """Releases every other entry without changing the table it walks."""

    def free_seq(self, seq: int) -> None:
        for block in self.tables[seq][::2]:
            self._release(block)
        del self.tables[seq]
        del self.lens[seq]


class _ShrinksAndSkipsLast(Allocating):  # type: ignore[misc]
    """Shrinks the table as it walks it, but never releases the last entry either way."""

    def free_seq(self, seq: int) -> None:
        table = self.tables[seq]
        last = table[-1]
        for block in table:
            table.remove(block)
            if block != last:
                self._release(block)
        del self.tables[seq]
        del self.lens[seq]


@pytest.mark.parametrize("impl", [_PopsHeadWhileWalking, _PopsTailWhileWalking])
def test_a_table_changed_under_its_own_loop_is_named(impl: Any) -> None:
    hint = _hint(impl)
    assert WALK in hint
    assert "the table shrank mid-walk, from 2 entries to 1" in hint
    assert "yours releases every block" in hint


@pytest.mark.parametrize("impl", [_SkipsEveryOther, _ShrinksAndSkipsLast])
def test_blocks_skipped_for_another_reason_are_not_put_on_the_loop(impl: Any) -> None:
    hint = _hint(impl)
    assert "shrank mid-walk" not in hint
    assert WALK not in hint
    assert "release one reference per table entry" in hint


Growing = checkpoint("block-manager", 2)
ONE = "part only at block size 1"


def _hint2(impl: Any) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("block-manager", impl, 2)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _NewBlockPastOne(Growing):  # type: ignore[misc]
    """Takes a new block when the new length leaves one token in the last block."""

    def append_slot(self, seq: int) -> Any:
        n, table = self.lens[seq], self.tables[seq]
        if (n + 1) % self.block_size == 1:
            table.append(self._alloc())
        self.lens[seq] = n + 1
        return Slot(table[-1], n % self.block_size, None)


class _NewBlockPastOneOrEmpty(Growing):  # type: ignore[misc]
    """The same test, with an empty table given its first block apart: at block size 1 every
    later append writes into the last block again."""

    def append_slot(self, seq: int) -> Any:
        n, table = self.lens[seq], self.tables[seq]
        if not table or (n + 1) % self.block_size == 1:
            table.append(self._alloc())
        self.lens[seq] = n + 1
        return Slot(table[-1], n % self.block_size, None)


class _FirstBlockOnly(Growing):  # type: ignore[misc]
    """Takes a block for an empty table only, whatever the block size."""

    def append_slot(self, seq: int) -> Any:
        n, table = self.lens[seq], self.tables[seq]
        if not table:
            table.append(self._alloc())
        self.lens[seq] = n + 1
        return Slot(table[-1], n % self.block_size, None)


@pytest.mark.parametrize("impl", [_NewBlockPastOne, _NewBlockPastOneOrEmpty])
def test_a_boundary_test_that_fails_only_for_one_token_blocks_is_named(impl: Any) -> None:
    hint = _hint2(impl)
    assert "yours took no new block for this append" in hint
    assert ONE in hint
    assert "The rule is `n % block_size == 0`" in hint


def test_a_boundary_missed_at_every_block_size_is_not_put_on_one_token_blocks() -> None:
    assert ONE not in _hint2(_FirstBlockOnly)
