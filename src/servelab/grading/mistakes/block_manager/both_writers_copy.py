"""Mistake: decides to copy by 'was this block forked' instead of its refcount."""

from servelab.grading.mistakes.block_manager.correct import BlockManager
from servelab.kv.blocks import Slot

HINT = "first writer"
LIKE = (
    "copies a shared block on every writer, the first writer and the second alike, "
    "deciding by 'was forked' instead of by refcount"
)


class Buggy(BlockManager):
    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self.forked: set[int] = set()

    def fork(self, parent: int, child: int) -> None:
        super().fork(parent, child)
        self.forked.update(self.tables[parent])

    def append_slot(self, seq: int) -> Slot:
        table, n = self._table(seq), self.lens[seq]
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
