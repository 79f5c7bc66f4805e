"""Mistake: releases the shared block before allocating its replacement."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import Slot

HINT = "before releasing"
LIKE = (
    "releases the shared block before allocating its copy, so OutOfBlocks leaves the "
    "state changed: allocate before releasing"
)


class Buggy(Correct):
    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            cow_src = table[-1]
            self._release(cow_src)  # released first: OutOfBlocks below leaves it dropped
            table[-1] = self._alloc()
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)
