"""Never copies a shared partial block: forked samples all write into the one block."""

from servelab.grading.mistakes.engine import BlockManager, Correct
from servelab.kv.blocks import Slot

HINT = "shared partial block"
LIKE = "lets every writer of a shared partial block write into it instead of copying it"


class SharesPartial(BlockManager):
    def _reserve_slot(self, seq):
        table, n = self.tables[seq], len(self.seq_tokens[seq])
        offset = n % self.block_size
        if offset == 0:
            table.append(self._alloc())
        return Slot(table[-1], offset, None)


class Buggy(Correct):
    block_manager_class = SharesPartial
