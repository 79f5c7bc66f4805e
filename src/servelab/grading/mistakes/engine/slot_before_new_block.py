"""Computes the slot before appending the new block, so at a boundary it names the old one."""

from servelab.grading.mistakes.engine import BlockManager, Correct
from servelab.kv.blocks import Slot

HINT = "block boundary"
LIKE = (
    "returns the previous block's slot at a block boundary (the slot is computed before the "
    "new block is appended)"
)


class OffByOne(BlockManager):
    def _reserve_slot(self, seq):
        table, n = self.tables[seq], len(self.seq_tokens[seq])
        offset, cow_src = n % self.block_size, None
        slot_block = table[-1] if table else None
        if offset == 0:
            table.append(self._alloc())
            if slot_block is None:
                slot_block = table[-1]
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
            slot_block = new
        return Slot(slot_block, offset, cow_src)


class Buggy(Correct):
    block_manager_class = OffByOne
