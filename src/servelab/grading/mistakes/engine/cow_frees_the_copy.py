"""Releases the new block instead of the shared one on copy-on-write: a block both used and free."""

from servelab.grading.mistakes.engine import BlockManager, Correct
from servelab.kv.blocks import Slot

HINT = "new block"
LIKE = "releases the new block instead of the shared source on copy-on-write"


class FreesTheCopy(BlockManager):
    def _reserve_slot(self, seq):
        table, n = self.tables[seq], len(self.seq_tokens[seq])
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(new)  # the copy goes back to the free list while the table holds it
            table[-1] = new
        return Slot(table[-1], offset, cow_src)


class Buggy(Correct):
    block_manager_class = FreesTheCopy
