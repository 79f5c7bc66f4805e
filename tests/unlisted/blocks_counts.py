"""Block-manager slips in how a call moves a refcount: a count set where one is added, a
fork that leaves the partial last block uncounted, a free that skips shared blocks, a copy
counted twice whatever the shared block's count."""

from servelab import checkpoint
from servelab.kv.blocks import Slot

TOPIC = "block-manager"
Forking = checkpoint(TOPIC, 3)


class ForkSetsTheCountToTwo(Forking):
    """A fork makes each block shared by two tables: sets its refcount to 2."""

    def fork(self, parent, child):
        table = self.tables[parent]
        for block in table:
            self.ref[block] = 2
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]


class ForkCountsTheFullBlocks(Forking):
    """Raises the refcounts of the parent's full blocks only: the partial last block is in
    both tables at refcount 1."""

    def fork(self, parent, child):
        table = self.tables[parent]
        for block in table[: self.lens[parent] // self.block_size]:
            self.ref[block] += 1
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]


class FreeLeavesSharedBlocks(Forking):
    """free_seq releases only the blocks no other table holds."""

    def free_seq(self, seq):
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in reversed(table):
            if self.ref[block] == 1:
                self._release(block)


class CopyCountedTwice(Forking):
    """Gives the copy of a shared block refcount 2, whatever the shared block's count."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self.ref[new] = 2
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


MISTAKES = {
    "fork sets the count to two": (3, ForkSetsTheCountToTwo, {"fork"}),
    "fork counts the full blocks": (3, ForkCountsTheFullBlocks, {"fork"}),
    "free leaves shared blocks": (3, FreeLeavesSharedBlocks, {"free_seq"}),
    "copy counted twice": (3, CopyCountedTwice, {"append_slot"}),
}
