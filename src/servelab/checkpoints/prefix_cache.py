"""Checkpoints of the 'prefix-cache' course notebook: its solution, step by step.

Generated from solutions/05_prefix_caching_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('prefix-cache', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


from collections import OrderedDict
from servelab.kv.blocks import OutOfBlocks, SequenceExists, UnknownSequence
ROOT = 0


from servelab.carry_forward import stand_in
BlockManager = stand_in('block-manager')


class PrefixSkeleton(BlockManager):
    def __init__(self, num_blocks, block_size):
        super().__init__(num_blocks, block_size)  # your free list, refcounts and tables
        self.evictable_lru = OrderedDict()  # cached blocks nobody holds, oldest first
        self.hash = [None] * num_blocks  # the key a block is cached under
        self.tokens = [None] * num_blocks  # its token ids, to verify hits
        self.map = {}  # hash -> block
        self.seq_tokens = {}  # seq -> its token ids

    # paging is your notebook-03 manager's; these hand it over (ready-made)
    def _table(self, seq):
        if seq not in self.tables:
            raise UnknownSequence(f"sequence {seq} is not allocated")
        return self.tables[seq]

    def _sync_len(self, seq):
        """Your notebook-03 methods count a sequence's tokens in `lens`; here its tokens are kept."""
        self.lens[seq] = len(self.seq_tokens[seq])

    def _forget(self, block):
        """Drop a block from the cache: its map entry, its hash and its tokens."""
        if self.hash[block] is not None:
            del self.map[self.hash[block]]
        self.hash[block] = self.tokens[block] = None

    def _claim(self, block):  # step 3 replaces this
        """A hit: one more table holds `block`."""
        self.ref[block] += 1

    def _room(self, hits):  # step 3 replaces this
        """Blocks an allocate can still take once `hits` are claimed."""
        return self.num_free

    def _release(self, block):  # step 3 replaces this
        super()._release(block)  # your notebook-03 release
        if self.ref[block] == 0:
            self._forget(block)

    def _reserve_slot(self, seq):
        """Your notebook-03 append_slot: a new block on a boundary, copy-on-write if shared."""
        self._sync_len(seq)
        return super().append_slot(seq)

    def fork(self, parent, child):
        self._table(parent)
        self._sync_len(parent)
        super().fork(parent, child)  # your notebook-03 fork
        self.seq_tokens[child] = list(self.seq_tokens[parent])

    def free_seq(self, seq):
        self._table(seq)
        self._sync_len(seq)
        super().free_seq(seq)  # your notebook-03 free_seq: the tail goes first
        del self.seq_tokens[seq]

    # inspection (ready-made)
    @property
    def num_free(self):
        return len(self.free) + len(self.evictable_lru)

    def num_cached_tokens(self, token_ids):
        return len(self._lookup(list(token_ids))) * self.block_size

    def block_table(self, seq):
        return list(self._table(seq))

    def seq_len(self, seq):
        return len(self.seq_tokens[seq])

    def refcount(self, block):
        return self.ref[block]

    def block_hash(self, block):
        return self.hash[block]

    def cached(self):
        return dict(self.map)

    def evictable(self):
        return list(self.evictable_lru)

    def free_list(self):
        return [*self.free, *self.evictable_lru]

    def sequences(self):
        return list(self.tables)


# Each step is a new class with its own name, built on the previous step's class. Running a
# cell again redefines the same class from the same parent, so re-running never changes a grade.
class ChainedBlocks(PrefixSkeleton):
    def _chain(self, tokens):
        chain, parent = [], ROOT
        for i in range(len(tokens) // self.block_size):
            block_tokens = tuple(tokens[i * self.block_size : (i + 1) * self.block_size])
            parent = hash((parent, block_tokens))
            chain.append((parent, block_tokens))
        return chain


class LookupBlocks(ChainedBlocks):
    def _register(self, block, h, block_tokens):
        if h not in self.map:
            self.map[h] = block
            self.hash[block] = h
            self.tokens[block] = block_tokens

    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            block = self.map.get(h)
            if block is None or self.tokens[block] != block_tokens:
                break
            hits.append(block)
        return hits


class SharingBlockManager(LookupBlocks):
    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size

    def append_slot(self, seq, token_id):
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:  # this token filled the block: name it
            table = self.tables[seq]
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            if parent is None:  # the block before stayed private (an equal one was cached first)
                h = self._chain(tokens)[-1][0]
            else:  # one hash, over the new block and its parent's name
                h = hash((parent, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


class PrefixBlockManager(SharingBlockManager):
    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
            else:
                self.free.append(block)

    def _alloc(self):
        if self.free:
            block = self.free.popleft()
        elif self.evictable_lru:
            block, _ = self.evictable_lru.popitem(last=False)
            self._forget(block)
        else:
            raise OutOfBlocks("no free block")
        self.ref[block] = 1
        return block

    def _claim(self, block):
        if self.ref[block] == 0:
            del self.evictable_lru[block]
        self.ref[block] += 1

    def _room(self, hits):
        return self.num_free - sum(1 for block in hits if self.ref[block] == 0)


TOPIC = 'prefix-cache'
STEPS = {
    1: lambda: LookupBlocks,
    2: lambda: SharingBlockManager,
    3: lambda: PrefixBlockManager,
}
