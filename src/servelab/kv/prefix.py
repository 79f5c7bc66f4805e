"""Prefix caching: reuse the KV blocks of a prompt prefix that another request already computed.

Identity of a block. Only *full* blocks are cached. A full block is named by a hash of its
token ids chained with the hash of the block before it, so equal hashes mean equal whole
prefixes, not just equal blocks. A hit is accepted only after comparing the stored token
ids and parent hash, so a hash collision, or a stale entry, can never serve wrong data.

Lifecycle of a block::

    plain free  --take-->  in use (refcount >= 1)  --full--> hashed, in the cache map
        ^                        |  last holder frees                     |
        |                        v                                        |
        +--evict (LRU)--  evictable (refcount 0, still hashed) <-----------+
                                 |  a later prompt hits it: back in use, no copy

Freed blocks that hold a hash stay in the cache: they go to the *evictable* list, an
``OrderedDict`` used as an O(1) LRU. They are reclaimed lazily, oldest first, and only
when no plain free block is left; reclaiming a block drops its hash from the map and
from the block, so a reused block never answers for its old contents. A sequence frees
its blocks in reverse, so its tail (the least shared part) is evicted first.

Costs. Lookup is a dict probe per block, a hit on an evictable block is an ``OrderedDict``
delete, and eviction is ``popitem(last=False)``: every operation is O(1) per block it
touches, with no list scans (a ``deque.remove`` would be O(n) in the pool size).

Engine interface::

    cached = bm.allocate(seq, prompt_ids)   # tokens [0, cached) already hold KV
    # compute KV for prompt_ids[cached:], write it via bm.block_table(seq)
    slot = bm.append_slot(seq, next_id)     # a block is hashed when it becomes full

``allocate`` caps the hit at ``(len - 1) // block_size`` whole blocks, so at least the last
prompt token is always computed (its logits start decoding) and no write ever lands in a
shared cached block. The blocks of a prompt are registered in the cache at ``allocate``:
the caller must write the prompt's KV before any attention reads it (a batched prefill
that writes every sequence's KV before attention satisfies this).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence

from servelab.kv.blocks import (
    InvalidBlock,
    InvalidConfig,
    InvalidLength,
    OutOfBlocks,
    SequenceExists,
    Slot,
    UnknownSequence,
)

__all__ = ["ROOT_HASH", "PrefixCachingBlockManager", "chain_hash"]

ROOT_HASH = 0x5E11AB  # parent hash of a sequence's first block


def chain_hash(parent: int, tokens: tuple[int, ...]) -> int:
    """The cache key of a full block: its tokens chained with its parent's key.

    Python's hash of a tuple of ints does not depend on ``PYTHONHASHSEED``, so keys are
    stable across processes.
    """
    return hash((parent, tokens))


def _check_token(token: object) -> int:
    if not isinstance(token, int) or isinstance(token, bool) or token < 0:
        raise InvalidLength(f"token ids are non-negative ints, got {token!r}")
    return token


def _check_seq_id(seq: object) -> int:
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise UnknownSequence(f"sequence ids are ints, got {seq!r}")
    return seq


def _check_positive(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidConfig(f"{name} must be a positive int, got {value!r}")
    return value


class PrefixCachingBlockManager:
    """A block manager that knows its sequences' token ids and shares equal prefixes.

    Same tables, refcounts, fork and copy-on-write as
    :class:`~servelab.kv.blocks.BlockManager`; ``allocate`` takes token ids and returns how
    many leading tokens were found in the cache, and ``append_slot`` takes the new token id.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks: int = _check_positive("num_blocks", num_blocks)
        self.block_size: int = _check_positive("block_size", block_size)
        self._free: deque[int] = deque(range(num_blocks))  # unhashed, ready to use
        self._evictable: OrderedDict[int, None] = OrderedDict()  # hashed, refcount 0; LRU first
        self._ref: list[int] = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._tokens: list[tuple[int, ...] | None] = [None] * num_blocks
        self._parent: list[int] = [ROOT_HASH] * num_blocks
        self._cached: dict[int, int] = {}  # hash -> block
        self._tables: dict[int, list[int]] = {}
        self._seq_tokens: dict[int, list[int]] = {}
        self._seq_hashes: dict[int, list[int]] = {}  # chain hash of each full block
        self.hit_blocks = 0
        self.queried_blocks = 0

    # ------------------------------------------------------------------ queries
    @property
    def num_free(self) -> int:
        """Blocks allocatable now: plain free plus evictable (cached, unreferenced)."""
        return len(self._free) + len(self._evictable)

    @property
    def num_cached(self) -> int:
        """Blocks that hold a registered hash (in use or evictable)."""
        return len(self._cached)

    def blocks_needed(self, n_tokens: int) -> int:
        """``ceil(n_tokens / block_size)``, ignoring the cache."""
        if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or n_tokens < 0:
            raise InvalidLength(f"a token count must be a non-negative int, got {n_tokens!r}")
        return -(-n_tokens // self.block_size)

    def num_cached_tokens(self, token_ids: Sequence[int]) -> int:
        """Leading tokens of ``token_ids`` that ``allocate`` would find cached (no side effects)."""
        tokens = self._check_tokens(token_ids)
        return len(self._lookup(tokens)[0]) * self.block_size

    def can_allocate(self, token_ids: Sequence[int]) -> bool:
        """Whether ``allocate`` of a new sequence with these tokens would succeed now."""
        tokens = self._check_tokens(token_ids)
        hits, _ = self._lookup(tokens)
        return self._new_blocks_needed(tokens, hits) <= self._available(hits)

    # ---------------------------------------------------------------- mutations
    def allocate(self, seq: int, token_ids: Sequence[int]) -> int:
        """Give ``seq`` blocks for its prompt, reusing cached ones; return the cached tokens.

        All or nothing: OutOfBlocks (changing nothing) if the blocks that are not cached
        do not fit. The returned count is a multiple of ``block_size`` and below
        ``len(token_ids)``.
        """
        seq = _check_seq_id(seq)
        if seq in self._tables:
            raise SequenceExists(f"sequence {seq} is already allocated; free_seq({seq}) first")
        tokens = self._check_tokens(token_ids)
        hits, hashes = self._lookup(tokens)
        need = self._new_blocks_needed(tokens, hits)
        if need > self._available(hits):
            raise OutOfBlocks(
                f"sequence {seq} needs {need} new blocks ({len(hits)} cached), "
                f"only {self._available(hits)} can be freed"
            )
        self.queried_blocks += (len(tokens) - 1) // self.block_size if tokens else 0
        self.hit_blocks += len(hits)
        for block in hits:  # claim hits first so eviction below cannot take them
            if self._ref[block] == 0:
                del self._evictable[block]
            self._ref[block] += 1
        table = list(hits)
        size = self.block_size
        for i in range(len(hits), -(-len(tokens) // size)):
            block = self._take()
            table.append(block)
            if i < len(hashes):
                self._register(
                    block,
                    hashes[i],
                    tuple(tokens[i * size : (i + 1) * size]),
                    hashes[i - 1] if i else ROOT_HASH,
                )
        self._tables[seq] = table
        self._seq_tokens[seq] = tokens
        self._seq_hashes[seq] = hashes
        return len(hits) * size

    def append_slot(self, seq: int, token_id: int) -> Slot:
        """Reserve the slot of ``token_id`` at the end of ``seq`` (copy-on-write as needed).

        When the token fills its block, the block is hashed and enters the cache.
        """
        table = self._table_of(seq)
        token = _check_token(token_id)
        tokens = self._seq_tokens[seq]
        n, size = len(tokens), self.block_size
        offset = n % size
        cow_src: int | None = None
        if offset == 0:
            if not self.num_free:
                raise OutOfBlocks(f"sequence {seq} needs a new block at token {n}; none free")
            table.append(self._take())
        elif self._ref[table[-1]] > 1:
            if not self.num_free:
                raise OutOfBlocks(
                    f"sequence {seq} must copy shared block {table[-1]}; no block is free"
                )
            new = self._take()  # take before release: an error above changed nothing
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        tokens.append(token)
        if offset == size - 1:
            hashes = self._seq_hashes[seq]
            parent = hashes[-1] if hashes else ROOT_HASH
            block_tokens = tuple(tokens[n + 1 - size :])
            h = chain_hash(parent, block_tokens)
            hashes.append(h)
            self._register(table[-1], h, block_tokens, parent)
        return Slot(table[-1], offset, cow_src)

    def fork(self, parent: int, child: int) -> None:
        """Make ``child`` share every block (and the token history) of ``parent``."""
        table = self._table_of(parent)
        child = _check_seq_id(child)
        if child in self._tables:
            raise SequenceExists(f"fork target {child} is already allocated; pick a new id")
        for block in table:
            self._ref[block] += 1
        self._tables[child] = list(table)
        self._seq_tokens[child] = list(self._seq_tokens[parent])
        self._seq_hashes[child] = list(self._seq_hashes[parent])

    def free_seq(self, seq: int) -> None:
        """Drop ``seq``; its hashed blocks stay cached (evictable), tail first in LRU order."""
        table = self._table_of(seq)
        del self._tables[seq], self._seq_tokens[seq], self._seq_hashes[seq]
        for block in reversed(table):
            self._release(block)

    # --------------------------------------------------------------- inspection
    def block_table(self, seq: int) -> list[int]:
        """A copy of ``seq``'s block table."""
        return list(self._table_of(seq))

    def seq_len(self, seq: int) -> int:
        """Tokens of ``seq`` that have a slot."""
        self._table_of(seq)
        return len(self._seq_tokens[seq])

    def token_ids(self, seq: int) -> list[int]:
        """A copy of ``seq``'s token ids."""
        self._table_of(seq)
        return list(self._seq_tokens[seq])

    def refcount(self, block: int) -> int:
        """Tables holding ``block`` (0 when it is free or evictable)."""
        return self._ref[self._check_block(block)]

    def block_hash(self, block: int) -> int | None:
        """The cache key ``block`` is registered under, or None."""
        return self._hash[self._check_block(block)]

    def free_list(self) -> list[int]:
        """Every allocatable block in allocation order: plain free ones, then evictable."""
        return [*self._free, *self._evictable]

    def evictable(self) -> list[int]:
        """Cached blocks no sequence holds, least recently freed first."""
        return list(self._evictable)

    def cached(self) -> dict[int, int]:
        """A copy of the cache map: hash -> block."""
        return dict(self._cached)

    def sequences(self) -> list[int]:
        """Live sequence ids in allocation order."""
        return list(self._tables)

    # ----------------------------------------------------------------- helpers
    def _check_tokens(self, token_ids: Sequence[int]) -> list[int]:
        if isinstance(token_ids, (str, bytes)) or not isinstance(token_ids, Sequence):
            raise InvalidLength(f"token_ids must be a sequence of ints, got {token_ids!r}")
        return [_check_token(t) for t in token_ids]

    def _check_block(self, block: int) -> int:
        if (
            not isinstance(block, int)
            or isinstance(block, bool)
            or not (0 <= block < self.num_blocks)
        ):
            raise InvalidBlock(f"block must be an int in [0, {self.num_blocks}), got {block!r}")
        return block

    def _table_of(self, seq: int) -> list[int]:
        seq = _check_seq_id(seq)
        try:
            return self._tables[seq]
        except KeyError:
            raise UnknownSequence(
                f"sequence {seq} is not allocated (never allocated, or already freed)"
            ) from None

    def _lookup(self, tokens: list[int]) -> tuple[list[int], list[int]]:
        """(hit blocks, chain hashes of every full block of ``tokens``)."""
        size = self.block_size
        hashes: list[int] = []
        hits: list[int] = []
        parent = ROOT_HASH
        hittable = (len(tokens) - 1) // size if tokens else 0
        for i in range(len(tokens) // size):
            block_tokens = tuple(tokens[i * size : (i + 1) * size])
            h = chain_hash(parent, block_tokens)
            hashes.append(h)
            if len(hits) == i < hittable:
                block = self._cached.get(h)
                if (
                    block is not None
                    and self._tokens[block] == block_tokens
                    and self._parent[block] == parent
                ):
                    hits.append(block)
            parent = h
        return hits, hashes

    def _new_blocks_needed(self, tokens: list[int], hits: list[int]) -> int:
        return -(-len(tokens) // self.block_size) - len(hits)

    def _available(self, hits: list[int]) -> int:
        claimed = sum(1 for b in hits if self._ref[b] == 0)  # evictable hits stop being free
        return self.num_free - claimed

    def _take(self) -> int:
        if self._free:
            block = self._free.popleft()
        else:
            block, _ = self._evictable.popitem(last=False)
            self._evict(block)
        self._ref[block] = 1
        return block

    def _evict(self, block: int) -> None:
        h = self._hash[block]
        if h is not None and self._cached.get(h) == block:
            del self._cached[h]
        self._hash[block] = None
        self._tokens[block] = None

    def _register(self, block: int, h: int, tokens: tuple[int, ...], parent: int) -> None:
        if h in self._cached:
            return  # an equal block is already cached; this one stays private
        self._cached[h] = block
        self._hash[block] = h
        self._tokens[block] = tokens
        self._parent[block] = parent

    def _release(self, block: int) -> None:
        self._ref[block] -= 1
        if self._ref[block] == 0:
            if self._hash[block] is not None:
                self._evictable[block] = None
            else:
                self._free.append(block)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, "
            f"block_size={self.block_size}, free={len(self._free)}, "
            f"evictable={len(self._evictable)}, cached={len(self._cached)}, "
            f"sequences={len(self._tables)})"
        )
