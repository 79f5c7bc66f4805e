"""Block-manager slips in a fork and what later reads it: a child given the full blocks only,
a copy decided by the first block's count or taken from the free list's right end, a free that
skips blocks three tables hold."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, Slot

TOPIC = "block-manager"
Forking = checkpoint(TOPIC, 3)


class ForkDropsPartialTail(Forking):
    """The child gets the parent's full blocks only; the partial last block is left out."""

    def fork(self, parent, child):
        table = self.tables[parent]
        full = table[: self.lens[parent] // self.block_size]
        for block in full:
            self.ref[block] += 1
        self.tables[child] = list(full)
        self.lens[child] = self.lens[parent]


class CopyDecidedByTheFirstBlock(Forking):
    """Decides copy-on-write by the refcount of the table's first block, not its last."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[0]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class FreeHandlesTwoHolders(Forking):
    """free_seq frees a block one table holds and drops one two hold to 1; a block three
    tables hold keeps its count."""

    def free_seq(self, seq):
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in reversed(table):
            if self.ref[block] == 1:
                self._release(block)
            elif self.ref[block] == 2:
                self.ref[block] = 1


class CopyTakenFromTheRight(Forking):
    """The copy of a shared partial block is popped from the right end of the free list."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            if not self.free:
                raise OutOfBlocks("no free block for the copy")
            new = self.free.pop()
            self.ref[new] = 1
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


MISTAKES = {
    "fork drops the partial tail": (3, ForkDropsPartialTail, {"fork"}),
    "copy decided by the first block": (3, CopyDecidedByTheFirstBlock, {"append_slot"}),
    "free handles two holders": (3, FreeHandlesTwoHolders, {"free_seq"}),
    "copy taken from the right": (3, CopyTakenFromTheRight, {"append_slot"}),
}
