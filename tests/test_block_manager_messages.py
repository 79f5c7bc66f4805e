"""A block-manager check's own message and hint say only what is true of the learner's run:
the reference's arithmetic is labelled as the reference's, and a check's rule is shown only
where what the learner's code did breaks it. Each slip below once read a rule it keeps, or a
sum told as if it were its own (or a check's message it still needs); graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.mistakes.block_manager.both_writers_copy import Buggy as BothWritersCopy
from servelab.kv.blocks import Slot

TOPIC = "block-manager"
Allocating = checkpoint(TOPIC, 1)
Growing = checkpoint(TOPIC, 2)
Forking = checkpoint(TOPIC, 3)


class AllocPeeksHead(Allocating):
    """_alloc reads the head of the free list (free[0]) and never takes it off."""

    def _alloc(self) -> int:
        block = int(self.free[0])
        self.ref[block] = 1
        return block


class AppendTakesBeforeBoundaryCheck(Growing):
    """append_slot takes a block on every call, and puts it in the table only on a boundary."""

    def append_slot(self, seq: int) -> Slot:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        new = self._alloc()
        if offset == 0:
            table.append(new)
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, None)


class ForkReservesNextBlock(Forking):
    """fork gives the child a block of its own for its next token when the parent's last
    block is full."""

    def fork(self, parent: int, child: int) -> None:
        super().fork(parent, child)
        if self.lens[child] % self.block_size == 0:
            self.tables[child].append(self._alloc())


class CowAppendsCopy(Forking):
    """Copy-on-write appends the copy to the table instead of replacing the shared entry."""

    def append_slot(self, seq: int) -> Slot:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset and self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table.append(new)
            self.lens[seq] = n + 1
            return Slot(new, offset, cow_src)
        return super().append_slot(seq)


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step, quiet=True)
    return str(failed.value)


# slip, step, what the report must say, what it must no longer say
CASES = {
    "free count after allocate": (
        AllocPeeksHead,
        1,
        ["num_free is 8, expected 6: the reference takes 2 of the 8 blocks"],
        ["after taking 2 of 8"],
    ),
    "a block taken while the last has room": (
        AppendTakesBeforeBoundaryCheck,
        2,
        ["num_free is 6 after the append, expected 7: in the reference token 3 goes into block"],
        ["no block should be allocated"],
    ),
    "a child's table wrong from the fork": (
        ForkReservesNextBlock,
        3,
        ["sequence 1's table is [0, 1], expected 1 block", "your `fork`"],
        ["changed too", "list(table)", "This check was written for"],
    ),
    "the copy appended, not in place": (
        CowAppendsCopy,
        3,
        ["sequence 0's table is [0, 1, 2] after its copy, expected [0, 2]", "table[-1] = new"],
        ["must copy it first (return cow_src)"],
    ),
    "both writers copy": (
        BothWritersCopy,
        3,
        ["in the reference sequence 0's copy leaves sequence 1 the only holder", "yours 1"],
        ["is now the only holder"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_checks_message_and_hint_say_only_what_the_run_shows(case: str) -> None:
    impl, step, says, never = CASES[case]
    text = _report(impl, step)
    for part in says:
        assert part in text, text
    for part in never:
        assert part not in text, text
