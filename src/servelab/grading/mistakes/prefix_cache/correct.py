"""A correct learner-style prefix-caching block manager (the notebook shape).

Every file beside this one subclasses it and plants exactly one known mistake.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from servelab.kv.blocks import OutOfBlocks, SequenceExists, Slot, UnknownSequence

ROOT = 0


class PrefixBlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free: deque[int] = deque(range(num_blocks))
        self.evictable_lru: OrderedDict[int, None] = OrderedDict()
        self.ref = [0] * num_blocks
        self.hash: list[int | None] = [None] * num_blocks
        self.tokens: list[tuple[int, ...] | None] = [None] * num_blocks
        self.map: dict[int, int] = {}
        self.tables: dict[int, list[int]] = {}
        self.seq_tokens: dict[int, list[int]] = {}

    # -- the cache
    def _chain(self, tokens: list[int]) -> list[tuple[int, tuple[int, ...]]]:
        out, parent = [], ROOT
        for i in range(len(tokens) // self.block_size):
            block = tuple(tokens[i * self.block_size : (i + 1) * self.block_size])
            parent = hash((parent, block))
            out.append((parent, block))
        return out

    def _lookup(self, tokens: list[int]) -> list[int]:
        hits = []
        for h, block_tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            b = self.map.get(h)
            if b is None or self.tokens[b] != block_tokens:
                break
            hits.append(b)
        return hits

    def _evict(self, b: int) -> None:
        del self.map[self.hash[b]]
        self.hash[b] = None
        self.tokens[b] = None

    def _alloc(self) -> int:
        if self.free:
            b = self.free.popleft()
        elif self.evictable_lru:
            b, _ = self.evictable_lru.popitem(last=False)
            self._evict(b)
        else:
            raise OutOfBlocks("no free block")
        self.ref[b] = 1
        return b

    def _release(self, b: int) -> None:
        self.ref[b] -= 1
        if self.ref[b] == 0:
            if self.hash[b] is not None:
                self.evictable_lru[b] = None
            else:
                self.free.append(b)

    def _register(self, b: int, h: int, block_tokens: tuple[int, ...]) -> None:
        if h not in self.map:
            self.map[h] = b
            self.hash[b] = h
            self.tokens[b] = block_tokens

    def _table(self, seq: int) -> list[int]:
        if seq not in self.tables:
            raise UnknownSequence(f"sequence {seq} is not allocated")
        return self.tables[seq]

    # -- the API
    def allocate(self, seq: int, token_ids: list[int]) -> int:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        claimed = sum(1 for b in hits if self.ref[b] == 0)
        if need > self.num_free - claimed:
            raise OutOfBlocks(f"need {need} blocks")
        for b in hits:
            if self.ref[b] == 0:
                del self.evictable_lru[b]
            self.ref[b] += 1
        table = list(hits)
        chain = self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            b = self._alloc()
            table.append(b)
            if i < len(chain):
                self._register(b, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size

    def append_slot(self, seq: int, token_id: int) -> Slot:
        table, tokens = self._table(seq), self.seq_tokens[seq]
        n = len(tokens)
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        tokens.append(token_id)
        if offset == self.block_size - 1:
            self._register(table[-1], *self._chain(tokens)[-1])
        return Slot(table[-1], offset, cow_src)

    def fork(self, parent: int, child: int) -> None:
        table = self._table(parent)
        if child in self.tables:
            raise SequenceExists(f"sequence {child} exists")
        for b in table:
            self.ref[b] += 1
        self.tables[child] = list(table)
        self.seq_tokens[child] = list(self.seq_tokens[parent])

    def free_seq(self, seq: int) -> None:
        table = self._table(seq)
        del self.tables[seq], self.seq_tokens[seq]
        for b in reversed(table):
            self._release(b)

    # -- inspection (ready-made in the exercise)
    @property
    def num_free(self) -> int:
        return len(self.free) + len(self.evictable_lru)

    def num_cached_tokens(self, token_ids: list[int]) -> int:
        return len(self._lookup(list(token_ids))) * self.block_size

    def block_table(self, seq: int) -> list[int]:
        return list(self._table(seq))

    def seq_len(self, seq: int) -> int:
        self._table(seq)
        return len(self.seq_tokens[seq])

    def refcount(self, block: int) -> int:
        return self.ref[block]

    def block_hash(self, block: int) -> int | None:
        return self.hash[block]

    def cached(self) -> dict[int, int]:
        return dict(self.map)

    def evictable(self) -> list[int]:
        return list(self.evictable_lru)

    def free_list(self) -> list[int]:
        return [*self.free, *self.evictable_lru]

    def sequences(self) -> list[int]:
        return list(self.tables)
