"""Block-manager slips in the order blocks are handed out or listed, and in where a token
lands: freed blocks reused first, blocks taken from the free list's right end, a table built
back to front, a copy written from its start."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, Slot

TOPIC = "block-manager"
Allocating = checkpoint(TOPIC, 1)
Forking = checkpoint(TOPIC, 3)


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


class TakenFromTheFreedEnd(Allocating):
    """Takes a new sequence's blocks from the right end of the free list, where freed blocks
    go, in list order."""

    def allocate(self, seq, n_tokens):
        need = -(-n_tokens // self.block_size)
        if need > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        take = list(self.free)[len(self.free) - need :]
        for block in take:
            self.free.remove(block)
            self.ref[block] = 1
        self.tables[seq] = take
        self.lens[seq] = n_tokens


class CopyWritesAtTheStart(Forking):
    """After a copy-on-write, returns offset 0, the start of the copy."""

    def append_slot(self, seq):
        slot = super().append_slot(seq)
        if slot.cow_src is not None:
            return Slot(slot.block, 0, slot.cow_src)
        return slot


MISTAKES = {
    "freed blocks reused first": (1, FreedBlocksReusedFirst, {"_alloc", "_release"}),
    "table built back to front": (1, TableBuiltBackToFront, {"allocate"}),
    "blocks taken from the freed end": (1, TakenFromTheFreedEnd, {"allocate"}),
    "copy writes at the start": (3, CopyWritesAtTheStart, {"append_slot"}),
}
