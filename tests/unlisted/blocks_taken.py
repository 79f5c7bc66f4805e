"""Block-manager slips in the order blocks are handed out or listed: freed blocks reused
first, in the order they were freed, and a table built back to front."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks

TOPIC = "block-manager"
Allocating = checkpoint(TOPIC, 1)


class FreedBlocksReusedFirst(Allocating):
    """Keeps the blocks it frees in a queue of its own and hands them out first, in the order
    they were freed, before the blocks that were free already."""

    def __init__(self, num_blocks, block_size):
        super().__init__(num_blocks, block_size)
        self.recycled = []

    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] == 0:
            self.recycled.append(block)
            self.free.append(block)

    def _alloc(self):
        if not self.free:
            raise OutOfBlocks("no free block")
        if self.recycled:
            block = self.recycled.pop(0)
            self.free.remove(block)
        else:
            block = self.free.popleft()
        self.ref[block] = 1
        return block


class TableBuiltBackToFront(Allocating):
    """Inserts each block it takes at the table's front: the table lists its blocks in
    reverse of the order they were taken."""

    def allocate(self, seq, n_tokens):
        need = -(-n_tokens // self.block_size)
        if need > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        table = []
        for _ in range(need):
            table.insert(0, self._alloc())
        self.tables[seq] = table
        self.lens[seq] = n_tokens


MISTAKES = {
    "freed blocks reused first": (1, FreedBlocksReusedFirst, {"_alloc", "_release"}),
    "table built back to front": (1, TableBuiltBackToFront, {"allocate"}),
}
