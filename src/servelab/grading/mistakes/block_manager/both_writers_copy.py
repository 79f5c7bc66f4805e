"""Mistake: decides to copy by 'was this block forked' instead of its refcount."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import Slot

HINT = "first writer"
LIKE = (
    "copies a shared block on every writer, the first writer and the second alike, "
    "deciding by 'was forked' instead of by refcount"
)


class Buggy(Correct):
    def __init__(self, num_blocks, block_size):
        super().__init__(num_blocks, block_size)
        self.forked = set()

    def fork(self, parent, child):
        super().fork(parent, child)
        self.forked.update(self.tables[parent])

    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif table[-1] in self.forked:  # stays true after the other writer copied
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)
