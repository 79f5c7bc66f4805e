"""Block-manager slips in places only one program visits: a table's order, a copy that lets
go of the shared block twice."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, Slot

TOPIC = "block-manager"
Allocating = checkpoint(TOPIC, 1)
Forking = checkpoint(TOPIC, 3)


class TableBuiltAsASet(Allocating):
    """Builds the table with a set comprehension, `{self._alloc() for ...}`: the blocks taken
    are the right ones, but the table lists them in set order (small ids first), not in the
    order they left the free list."""

    def allocate(self, seq, n_tokens):
        need = -(-n_tokens // self.block_size)
        if need > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = list({self._alloc() for _ in range(need)})
        self.lens[seq] = n_tokens


class CopyReleasesTheSharedBlockTwice(Forking):
    """After copying a shared partial block, releases the shared block twice: once for the
    writer and once more, so with two holders it goes back to the free list while the other
    sequence still reads it."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class CopyZeroesTheSharedBlock(Forking):
    """After copying a shared partial block, sets the shared block's refcount to 0 and frees
    it, as if the writer had been its only holder."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        if n % self.block_size and self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self.ref[cow_src] = 0
            self.free.append(cow_src)
            table[-1] = new
            self.lens[seq] = n + 1
            return Slot(new, n % self.block_size, cow_src)
        return super().append_slot(seq)


class CopyReleasesBothBlocks(Forking):
    """After copying a shared partial block, releases the shared block and then the copy too:
    the copy sits in the writer's table at refcount 0, back on the free list."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        if n % self.block_size and self.ref[table[-1]] > 1:
            new = self._alloc()
            src = table[-1]
            self._release(src)
            table[-1] = new
            self._release(new)
            self.lens[seq] = n + 1
            return Slot(new, n % self.block_size, src)
        return super().append_slot(seq)


class CopyPeeksTheFreeList(Forking):
    """Takes the copy by reading the free list's left end without taking it off (free[0]),
    and never counts it: the copy stays free at refcount 0 while the writer's table holds it."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        if n % self.block_size and self.ref[table[-1]] > 1:
            if not self.free:
                raise OutOfBlocks("no free block")
            new = self.free[0]
            src = table[-1]
            self._release(src)
            table[-1] = new
            self.lens[seq] = n + 1
            return Slot(new, n % self.block_size, src)
        return super().append_slot(seq)


MISTAKES = {
    "table built as a set": (1, TableBuiltAsASet, {"allocate"}),
    "copy releases the shared block twice": (3, CopyReleasesTheSharedBlockTwice, {"append_slot"}),
    "copy zeroes the shared block": (3, CopyZeroesTheSharedBlock, {"append_slot"}),
    "copy releases both blocks": (3, CopyReleasesBothBlocks, {"append_slot"}),
    "copy peeks the free list": (3, CopyPeeksTheFreeList, {"append_slot"}),
}
