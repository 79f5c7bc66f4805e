"""Block-manager readings say what the first differing call shows, and a cause only on its proof:
each sentence below is still shown on a real slip graded end to end, and kept back from a slip
with another cause whose first differing call gives the same numbers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from buggy_impls import failing_report, shown_hint
from servelab import checkpoint
from servelab.grading import load_topic
from servelab.grading.diagnose import HOOKS
from servelab.grading.mistakes import mistakes
from servelab.grading.mistakes.block_manager import cow_no_release, free_ignores_refcount
from servelab.kv.blocks import Slot

B2, B3 = checkpoint("block-manager", 2), checkpoint("block-manager", 3)


class _ReleaseFreesAtOne(B3):  # type: ignore[misc]
    """_release frees a block once its count is at most 1: it reads the count, wrongly."""

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] <= 1 and block not in self.free:
            self.free.append(block)


class _BoundaryCountsTableHold(B2):  # type: ignore[misc]
    """A boundary block gets one more count after _alloc (no copy anywhere)."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            new = self._alloc()
            self.ref[new] += 1
            table.append(new)
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, None)


class _CopyInheritsCount(B3):  # type: ignore[misc]
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


class _CopiesWholeTable(B3):  # type: ignore[misc]
    """A write into a shared partial block copies every shared block, full ones too."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            cow_src = table[-1]
            for i, b in enumerate(table):
                if self.ref[b] > 1:
                    new = self._alloc()
                    self._release(b)
                    table[i] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class _BoundaryTakesASpare(B3):  # type: ignore[misc]
    """On a boundary of a shared table, takes the new block and a spare: no copy named."""

    def append_slot(self, seq: int) -> Any:
        table = self.tables[seq]
        if self.lens[seq] % self.block_size == 0 and table and self.ref[table[0]] > 1:
            table.append(self._alloc())
        return super().append_slot(seq)


class _CopyLowersTheCopy(B3):  # type: ignore[misc]
    """Takes the copy with _alloc, then lowers table[-1] (the copy by now) by hand."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            cow_src = table[-1]
            table[-1] = self._alloc()
            self.ref[table[-1]] -= 1
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class _PopsTheRightEnd(B2):  # type: ignore[misc]
    """A boundary block taken with free.pop(), past _alloc: the right end, never counted."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            table.append(self.free.pop())
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, None)


class _SlotReadBeforeGrow(B2):  # type: ignore[misc]
    """Reads the slot's block before appending the boundary block."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, block = n % self.block_size, table[-1] if table else None
        if offset == 0:
            table.append(self._alloc())
            block = table[-1] if block is None else block
        self.lens[seq] = n + 1
        return Slot(block, offset, None)


class _SlotFromTheLastToken(B2):  # type: ignore[misc]
    """Appends first, then picks the block of the token before (n - 1)."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            table.append(self._alloc())
        self.lens[seq] = n + 1
        return Slot(table[max(n - 1, 0) // self.block_size], offset, None)


class _OneBasedOffset(B2):  # type: ignore[misc]
    """Offsets counted from 1."""

    def append_slot(self, seq: int) -> Any:
        slot = super().append_slot(seq)
        return Slot(slot.block, slot.offset + 1, slot.cow_src)


# name: (slip, step, what its report must say, what it must no longer say)
SLIPS: dict[str, tuple[Any, int, str, str | None]] = {
    "release compares with 1": (_ReleaseFreesAtOne, 3, "when its refcount reaches 0", "ignore"),
    "boundary block counted twice": (
        _BoundaryCountsTableHold,
        2,
        "refcount is the number of table entries",
        "after copying",
    ),
    "copy inherits the count": (
        _CopyInheritsCount,
        3,
        "the refcount the shared block 1 had before the call (2; made again on copies",
        "drop the writer's reference",
    ),
    "every shared block copied": (_CopiesWholeTable, 3, "copied a block the reference", None),
    "a spare taken on the boundary": (_BoundaryTakesASpare, 3, "took 2 blocks", "copied"),
    "the copy lowered, not the source": (_CopyLowersTheCopy, 3, "refcount 0", "with _alloc"),
    "boundary block popped off the right": (_PopsTheRightEnd, 2, "right end of the free", None),
    "slot read before the block is appended": (_SlotReadBeforeGrow, 2, "block just appended", None),
    "slot from the token before": (_SlotFromTheLastToken, 2, "block just appended", "read the"),
    "offsets from 1": (_OneBasedOffset, 2, "counted from 0", "is the token counted"),
}


@pytest.mark.parametrize("name", list(SLIPS))
def test_the_report_says_what_the_call_shows_and_no_cause_it_cannot_prove(name: str) -> None:
    impl, step, said, unsaid = SLIPS[name]
    report, _ = failing_report("block-manager", impl, step)
    assert said in report.hint, report.hint
    assert unsaid is None or unsaid not in report.hint, report.hint


def _undiagnosed_hint(impl: Any) -> str:
    topic = replace(load_topic("block-manager"), diagnose=lambda program, impl: None)
    report, program = failing_report(topic, impl)
    others = [m for m in mistakes("block-manager") if m.impl is not impl]
    return shown_hint(HOOKS["block-manager"].explain(program, impl, None, others), report)


@pytest.mark.parametrize(
    ("impl", "said"),
    [
        (free_ignores_refcount.Buggy, "(do not ignore the refcount)"),
        (cow_no_release.Buggy, "after copying, drop the writer's reference to the shared block"),
    ],
)
def test_the_cause_is_still_said_of_the_slip_it_was_written_for(impl: Any, said: str) -> None:
    assert said in _undiagnosed_hint(impl)
