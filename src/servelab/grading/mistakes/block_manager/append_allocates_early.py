"""append_slot takes a new block when the last one becomes full instead of when the next token
crosses the boundary."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import Slot

HINT = "boundary"
LIKE = "allocates a block one token before the boundary is crossed"


class Buggy(Correct):
    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0 and n == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            return super().append_slot(seq)
        self.lens[seq] = n + 1
        slot = Slot(table[-1], offset, None)
        if (n + 1) % self.block_size == 0:
            table.append(self._alloc())
        return slot
