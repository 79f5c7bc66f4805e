"""A copy whose slot names the shared block it copied, and a sequence of 0 tokens refused for
its empty table, are named on the real slip graded end to end; a slip whose report looks the
same but whose fields or replay differ gets no such sentence."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import Slot, UnknownSequence

Forking = checkpoint("block-manager", 3)
Final = checkpoint("block-manager", 4)


def _report(impl: Any, step: int) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("block-manager", impl, step)
    return str(failed.value)


def _hint(report: str) -> str:
    return next(line for line in report.splitlines() if "hint:" in line)


class _SlotOfTheSource(Forking):  # type: ignore[misc]
    """Copies the shared partial block right, then returns the block it copied as the slot's."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            table.append(self._alloc())
            return self._count(seq, Slot(table[-1], 0, None))
        shared = table[-1]
        if self.ref[shared] == 1:
            return self._count(seq, Slot(shared, offset, None))
        table[-1] = self._alloc()
        self._release(shared)
        return self._count(seq, Slot(shared, offset, shared))

    def _count(self, seq: int, slot: Any) -> Any:
        self.lens[seq] += 1
        return slot


class _ClaimsACopyInPlace(Forking):  # type: ignore[misc]
    """Writes into the shared partial block in place, yet names it as cow_src."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            table.append(self._alloc())
        self.lens[seq] = n + 1
        shared = table[-1] if offset and self.ref[table[-1]] > 1 else None
        return Slot(table[-1], offset, shared)


class _EmptyTableIsUnknown(Final):  # type: ignore[misc]
    """Counts a sequence known only while its table lists a block."""

    def _known(self, seq: int) -> None:
        if len(self.tables.get(seq, ())) == 0:
            raise UnknownSequence(f"no sequence {seq}")


class _NoTokensIsUnknown(Final):  # type: ignore[misc]
    """Counts a sequence known only while it holds a token: a block in its table changes nothing."""

    def _known(self, seq: int) -> None:
        if not self.lens.get(seq):
            raise UnknownSequence(f"no sequence {seq}")


def test_a_slot_that_names_the_copied_block_is_named() -> None:
    report = _report(_SlotOfTheSource, 3)
    assert "names block 1, its cow_src, as the block written to" in report
    hint = _hint(report)
    assert "yours made the reference's copy (block 2 took the shared block 1's place" in hint
    assert "the slot it returned names block 1, the shared block it copied (cow_src)" in hint
    assert "written for" not in hint


def test_a_copy_claimed_but_written_in_place_is_not_said_to_be_made() -> None:
    report = _report(_ClaimsACopyInPlace, 3)
    assert "names block 1, its cow_src, as the block written to" in report
    assert "made the reference's copy" not in report


def test_a_sequence_refused_for_its_empty_table_is_named() -> None:
    hint = _hint(_report(_EmptyTableIsUnknown, 4))
    assert "start at your `_known`" in hint
    assert "its table holds one block, the same call raises nothing" in hint
    assert "yours takes an empty table for a missing one" in hint
    assert "removed from one structure" not in hint


def test_a_sequence_refused_for_its_length_is_not_said_to_be_refused_for_its_table() -> None:
    hint = _hint(_report(_NoTokensIsUnknown, 4))
    assert "empty table" not in hint
    assert "removed from one structure" not in hint
    assert "though sequence 0 is allocated (tables before the call hold it)" in hint
