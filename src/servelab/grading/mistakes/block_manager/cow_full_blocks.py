"""Mistake: copy-on-write of full blocks too (checks sharing before the boundary)."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import Slot

HINT = "full"
LIKE = "copies full blocks on write too, not only the trailing partial block"


class Buggy(Correct):
    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if table and self.ref[table[-1]] > 1:  # copies the last block even when it is full
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        if offset == 0:
            table.append(self._alloc())
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)
