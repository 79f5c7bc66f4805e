"""Block-manager slips, each on the notebook's own classes."""

from servelab import checkpoint
from servelab.kv.blocks import InvalidLength, OutOfBlocks, Slot

TOPIC = "block-manager"
Allocating = checkpoint(TOPIC, 1)
Growing = checkpoint(TOPIC, 2)
Forking = checkpoint(TOPIC, 3)
Final = checkpoint(TOPIC, 4)


class AllocateZeroRaises(Final):
    """Refuses a sequence of zero tokens as an invalid length."""

    def allocate(self, seq, n_tokens):
        if n_tokens == 0:
            raise InvalidLength("a sequence needs at least one token")
        return super().allocate(seq, n_tokens)


class ForkZeroesTheParent(Forking):
    """Gives the child the parent's length, then sets the parent's to 0."""

    def fork(self, parent, child):
        super().fork(parent, child)
        self.lens[parent] = 0


class ForkCountsBeforeCheck(Final):
    """Raises the parent's refcounts, then finds the child exists and raises: counts stay up."""

    def fork(self, parent, child):
        self._known(parent)
        for block in self.tables[parent]:
            self.ref[block] += 1
        self._new(child)
        self.tables[child] = list(self.tables[parent])
        self.lens[child] = self.lens[parent]


class OneBlockTooMany(Final):
    """Counts `n // block_size + 1` blocks: a prompt that fills its blocks exactly gets one more."""

    def _blocks_for(self, n_tokens):
        return n_tokens // self.block_size + 1

    def allocate(self, seq, n_tokens):
        self._new(seq)
        need = self._blocks_for(n_tokens)
        if need > len(self.free):
            from servelab.kv.blocks import OutOfBlocks

            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens


class ForkLengthPlusOne(Forking):
    """The child's length is the parent's plus one (as if the next token were already there)."""

    def fork(self, parent, child):
        table = self.tables[parent]
        for block in table:
            self.ref[block] += 1
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent] + 1


class CopyWithoutSource(Forking):
    """Copies a shared last block but reports no source, so its tokens are never copied."""

    def append_slot(self, seq):
        slot = super().append_slot(seq)
        return Slot(slot.block, slot.offset, None)


class AppendKeepsLength(Final):
    """Hands out the slot but never records the token: the length stays where it was."""

    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        return Slot(table[-1], offset, cow_src)


class AllocFromTheRight(Final):
    """_alloc pops the right end of the free list: the block freed last is handed out first."""

    def _alloc(self):
        if not self.free:
            raise OutOfBlocks("no free block")
        block = self.free.pop()
        self.ref[block] = 1
        return block


class SlotFromTheNewLength(Final):
    """Raises the length first and takes the slot from the new length: every token's slot is
    one position further on."""

    def append_slot(self, seq):
        self._known(seq)
        table = self.tables[seq]
        self.lens[seq] += 1
        n = self.lens[seq]
        offset = n % self.block_size
        if offset == 0 or not table:
            table.append(self._alloc())
        return Slot(table[-1], offset, None)


class CopyForgetsTheLength(Final):
    """The copy-on-write branch returns before counting the token."""

    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset and self.ref[table[-1]] > 1:
            new = self._alloc()
            source = table[-1]
            self._release(source)
            table[-1] = new
            return Slot(new, offset, source)
        return super().append_slot(seq)


class RoomCountedInTokens(Allocating):
    """Compares the prompt's tokens, not its blocks, with the free blocks: a prompt that fits
    in fewer blocks than it has tokens is refused while its blocks are free."""

    def allocate(self, seq, n_tokens):
        if n_tokens > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {n_tokens} blocks")
        super().allocate(seq, n_tokens)


class CopyOnlyWithTwoHolders(Final):
    """Copies a shared partial block only when exactly two tables hold it: after a fork of a
    fork, three do, and the first writer writes in place into the others' block."""

    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] == 2:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class CopySetsSourceToOne(Final):
    """After copying, sets the old block's refcount to 1 (the other holder is its only one
    now), which is wrong once three tables held it."""

    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self.ref[cow_src] = 1
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class ForkOfEmptySharesItsList(Final):
    """Copies the parent's table only when it has blocks: the child of an empty sequence gets
    the parent's own (empty) list, and the first block either appends shows up in both."""

    def fork(self, parent, child):
        self._known(parent)
        self._new(child)
        table = self.tables[parent]
        for block in table:
            self.ref[block] += 1
        self.tables[child] = list(table) if table else table
        self.lens[child] = self.lens[parent]


class CopyDecidedByLiveForks(Final):
    """Copies a shared block only while a sequence forked from this one is live: a fork of a
    fork whose own child was freed still shares its parent's block, and writes in place."""

    def fork(self, parent, child):
        super().fork(parent, child)
        self.forks = getattr(self, "forks", {})
        self.forks.setdefault(parent, set()).add(child)

    def append_slot(self, seq):
        self._known(seq)
        forks = getattr(self, "forks", {})
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        live = [s for s in forks.get(seq, ()) if s in self.tables]
        if offset and self.ref[table[-1]] > 1 and seq in forks and not live:
            self.lens[seq] = n + 1
            return Slot(table[-1], offset, None)
        return super().append_slot(seq)


class FreedInSetOrder(Allocating):
    """Releases the blocks of `set(table)`: small ids come out in ascending order, the table's
    head first, where the notebook frees the last block first."""

    def free_seq(self, seq):
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in set(table):
            self._release(block)


class LengthIsTheLastIndex(Allocating):
    """Records a new sequence's length as the index of its last token, n_tokens - 1."""

    def allocate(self, seq, n_tokens):
        super().allocate(seq, n_tokens)
        self.lens[seq] = max(n_tokens - 1, 0)


class BoundaryBlockPoppedRight(Growing):
    """Takes the boundary block with `free.pop()`: the right end, and no refcount set."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            if not self.free:
                raise OutOfBlocks("no free block")
            table.append(self.free.pop())
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, None)


class CopyNamesItselfTheSource(Forking):
    """Returns the new block as cow_src, where the source is the shared block it copies."""

    def append_slot(self, seq):
        slot = super().append_slot(seq)
        if slot.cow_src is not None:
            return Slot(slot.block, slot.offset, slot.block)
        return slot


class CopyLeftOutOfTheTable(Forking):
    """Copies a shared block and hands out the copy, but never puts it in the writer's table."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset != 0 and self.ref[table[-1]] > 1:
            new = self._alloc()
            source = table[-1]
            self._release(source)
            self.lens[seq] = n + 1
            return Slot(new, offset, source)
        return super().append_slot(seq)


class ZeroTokensSkipTheIdCheck(Final):
    """Checks the id only for a prompt with tokens: allocate(live, 0) replaces the live one."""

    def allocate(self, seq, n_tokens):
        if n_tokens != 0:
            self._new(seq)
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise InvalidLength(f"a token count must be a non-negative int, got {n_tokens!r}")
        Forking.allocate(self, seq, n_tokens)


class LengthBeforeTheIdCheck(Final):
    """Records the length before the SequenceExists check: a refused allocate of a live
    sequence overwrites its length (it takes no block)."""

    def allocate(self, seq, n_tokens):
        self.lens[seq] = n_tokens
        self._new(seq)
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise InvalidLength(f"bad length {n_tokens!r}")
        need = -(-n_tokens // self.block_size)
        if need > len(self.free):
            del self.lens[seq]
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = [self._alloc() for _ in range(need)]


class BlocksBeforeTheIdCheck(Final):
    """Checks the room first, takes the blocks, and only then checks SequenceExists: a refused
    allocate of a live sequence keeps the blocks it took."""

    def allocate(self, seq, n_tokens):
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise InvalidLength(f"bad length {n_tokens!r}")
        need = -(-n_tokens // self.block_size)
        if need > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        table = [self._alloc() for _ in range(need)]
        self._new(seq)
        self.tables[seq] = table
        self.lens[seq] = n_tokens


class FreeSeqSkipsTheLast(Allocating):
    """Releases `reversed(table[:-1])`: the last block of every freed sequence stays held."""

    def free_seq(self, seq):
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in reversed(table[:-1]):
            self._release(block)


class ForkGivesTheChildABlock(Forking):
    """Shares the parent's blocks and counts them, then gives the child a fresh block of its
    own for its next token."""

    def fork(self, parent, child):
        super().fork(parent, child)
        self.tables[child].append(self._alloc())


class RoomFromAllBlocks(Allocating):
    """Checks a request against the whole pool, not the free blocks: one the pool could hold
    but the free list cannot takes blocks until the list runs dry, then raises."""

    def allocate(self, seq, n_tokens):
        need = -(-n_tokens // self.block_size)
        if need > self.num_blocks:
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens


class SignCheckedBeforeType(Final):
    """Compares the length with 0 before it checks for an int: a str length raises
    TypeError from the comparison instead of InvalidLength."""

    def allocate(self, seq, n_tokens):
        self._new(seq)
        if n_tokens < 0 or not isinstance(n_tokens, int):
            raise InvalidLength(f"a token count must be a non-negative int, got {n_tokens!r}")
        Forking.allocate(self, seq, n_tokens)


class ForkChecksTheChildFirst(Final):
    """Checks the child id before the parent: fork(unknown, live) raises SequenceExists where
    the unknown parent (UnknownSequence) comes first."""

    def fork(self, parent, child):
        self._new(child)
        self._known(parent)
        Forking.fork(self, parent, child)


class LengthBeforeTheRoom(Allocating):
    """Records the length before the room check: a refused request leaves a length behind
    for a sequence that has no table."""

    def allocate(self, seq, n_tokens):
        self.lens[seq] = n_tokens
        need = -(-n_tokens // self.block_size)
        if need > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = [self._alloc() for _ in range(need)]


class FreeKeepsTheLength(Allocating):
    """Frees the table's blocks tail first but keeps the sequence's length: a freed id
    still answers seq_len, and its entry stays for ever."""

    def free_seq(self, seq):
        for block in reversed(self.tables.pop(seq)):
            self._release(block)


class CopyInPlaceWithoutRoom(Forking):
    """Step 3, append_slot: with no free block for the copy of a shared partial block, writes
    into the shared block in place (its sibling sees the token) instead of raising."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset and self.ref[table[-1]] > 1 and not self.free:
            self.lens[seq] = n + 1
            return Slot(table[-1], offset, None)
        return super().append_slot(seq)


class AppendRaisesTheLengthFirst(Growing):
    """Records the token before taking the block: an OutOfBlocks on a boundary leaves the
    length one too long."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        self.lens[seq] = n + 1
        offset = n % self.block_size
        if offset == 0:
            table.append(self._alloc())
        return Slot(table[-1], offset, None)


class AppendLeavesAHalfMadeEntry(Growing):
    """Grows the table before the block is in hand: an OutOfBlocks on a boundary leaves a
    None at the table's end."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            table.append(None)
            table[-1] = self._alloc()
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, None)


MISTAKES = {
    "the length compared with 0 before its type": (4, SignCheckedBeforeType, {"allocate"}),
    "room checked against the whole pool": (1, RoomFromAllBlocks, {"allocate"}),
    "room counted in tokens": (1, RoomCountedInTokens, {"allocate"}),
    "refcounts raised before the fork check": (4, ForkCountsBeforeCheck, {"fork"}),
    "one block too many": (4, OneBlockTooMany, {"allocate"}),
    "fork length plus one": (3, ForkLengthPlusOne, {"fork"}),
    "allocate of zero tokens raises": (4, AllocateZeroRaises, {"allocate"}),
    "fork zeroes the parent's length": (3, ForkZeroesTheParent, {"fork"}),
    "copy-on-write without its source": (3, CopyWithoutSource, {"append_slot"}),
    "append_slot keeps the length": (4, AppendKeepsLength, {"append_slot"}),
    "alloc takes from the right end": (4, AllocFromTheRight, {"_alloc"}),
    "slot from the raised length": (4, SlotFromTheNewLength, {"append_slot"}),
    "copy-on-write forgets the length": (4, CopyForgetsTheLength, {"append_slot"}),
    "copy only with two holders": (3, CopyOnlyWithTwoHolders, {"append_slot"}),
    "copy sets its source to one holder": (3, CopySetsSourceToOne, {"append_slot"}),
    "fork of an empty sequence shares its list": (3, ForkOfEmptySharesItsList, {"fork"}),
    "copy decided by live forks": (3, CopyDecidedByLiveForks, {"append_slot"}),
    "blocks freed in set order": (1, FreedInSetOrder, {"free_seq"}),
    "length recorded as the last index": (1, LengthIsTheLastIndex, {"allocate"}),
    "boundary block popped from the right": (2, BoundaryBlockPoppedRight, {"append_slot"}),
    "copy names itself the source": (3, CopyNamesItselfTheSource, {"append_slot"}),
    "copy left out of the table": (3, CopyLeftOutOfTheTable, {"append_slot"}),
    "zero tokens skip the id check": (4, ZeroTokensSkipTheIdCheck, {"allocate"}),
    "length recorded before the id check": (4, LengthBeforeTheIdCheck, {"allocate"}),
    "blocks taken before the id check": (4, BlocksBeforeTheIdCheck, {"allocate"}),
    "free_seq skips the last block": (1, FreeSeqSkipsTheLast, {"free_seq"}),
    "fork gives the child a block": (3, ForkGivesTheChildABlock, {"fork"}),
    "fork checks the child first": (4, ForkChecksTheChildFirst, {"fork"}),
    "length recorded before the room check": (1, LengthBeforeTheRoom, {"allocate"}),
    "free keeps the length": (1, FreeKeepsTheLength, {"free_seq"}),
    "a copy without room written in place": (3, CopyInPlaceWithoutRoom, {"append_slot"}),
    "append raises the length before the block": (2, AppendRaisesTheLengthFirst, {"append_slot"}),
    "append leaves a half-made entry": (2, AppendLeavesAHalfMadeEntry, {"append_slot"}),
}
