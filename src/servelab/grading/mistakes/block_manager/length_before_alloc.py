"""append_slot raises the sequence's length before taking a block, so an OutOfBlocks leaves
the length bumped."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import Slot

HINT = "length before"
LIKE = (
    "raises the sequence length before taking the block, so an OutOfBlocks leaves the length "
    "bumped: count the token only once its slot exists"
)


class Buggy(Correct):
    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        self.lens[seq] = n + 1  # too early: the _alloc below may raise
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        return Slot(table[-1], offset, cow_src)
