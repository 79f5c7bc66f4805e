"""Reports the new block as the copy's source: the table entry is replaced before it is read."""

from servelab.grading.mistakes.engine import BlockManager, Correct
from servelab.kv.blocks import Slot

HINT = "source"
LIKE = "reports the new block as the copy-on-write source block"


class WrongSource(BlockManager):
    def _reserve_slot(self, seq):
        table, n = self.tables[seq], len(self.seq_tokens[seq])
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            self._release(table[-1])
            table[-1] = new
            cow_src = table[-1]  # read after the entry was replaced: the new block itself
        return Slot(table[-1], offset, cow_src)


class Buggy(Correct):
    block_manager_class = WrongSource
