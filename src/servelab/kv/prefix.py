"""Prefix caching: reuse the KV blocks of a prompt prefix that another request already computed.

Identity of a block. Only *full* blocks are cached. A full block is named by a hash of its
token ids chained with the hash of the block before it (the first block chains on a root
derived from the sequence's ``extra_key``: a cache salt, an adapter id), so equal names
mean equal whole prefixes as long as the hash does not collide. The name only *finds* a
candidate; what decides a hit is the block's *prefix identity*, a small int that stands
for its whole prefix exactly. Identities are interned: the identity of a block is looked up
by the exact pair (its parent's identity, its token ids) in a dict, which compares keys by
equality, so two blocks share an identity if and only if their whole prefixes (and root
keys) are equal, whatever the hash does. A hit is accepted when the candidate's stored
token ids equal the sequence's **and** its parent's identity is the identity of the prefix
the sequence has matched so far (for a first block: the same root key). By induction from
the first block, a hit's whole prefix equals the sequence's: a collision costs a miss,
never wrong data.

Every full block gets an identity, cached or not, so the cache reuses as much as a
content-addressed one: a *twin* (a private block equal to a cached one, e.g. the last
block of a one-block prompt, which is always computed) chains its children on the shared
identity, and a child stays reachable after its parent is evicted and an equal prefix is
computed again. The map holds one block per name (vLLM v1 keeps several; one is enough
to serve every hit): on a collision, or when an equal twin is already cached, the block
already cached keeps the name and the newcomer stays private (plain free once released).
An identity lives while a block carries it or a child identity refers to it, so at most
one per prefix of a block that holds one.

The hash. ``hash_algo="sha256"`` (the default, as vLLM chose after its advisory
GHSA-rm76-4mrf-v9r8): SHA-256 over the parent's 32-byte hash and the block's ids as 8-byte
ints; names are stable across processes and machines, and nobody can construct a
collision to steer which blocks are probed. ``"builtin"``: Python's ``hash`` of
``(parent, tokens)``, faster, stable across processes for int tokens, but colliding by
design (``hash(2**61 - 1) == hash(0)``): safe here only because of the check above. A
callable ``(parent_hash, block_tokens) -> int`` may be passed instead (tests use one that
collides on purpose).

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

Costs. Lookup is a dict probe and a list comparison per block; a block that fills interns
its identity (a tuple and a dict probe); a hit on an evictable block is an ``OrderedDict``
delete, and eviction is ``popitem(last=False)`` plus dropping the identity (a chain of
identities nothing refers to any more is dropped at once, each of them once: O(1)
amortized). Every operation is O(1) per block it touches, with no list scans (a
``deque.remove`` would be O(n) in the pool size). Fork and copy-on-write are
:class:`~servelab.kv.blocks.BlockTables`'.

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

import hashlib
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Literal

from servelab.kv.blocks import (
    BlockTables,
    InvalidConfig,
    KVCacheError,
    OutOfBlocks,
    SequenceExists,
    Slot,
    check_seq_id,
    check_token_id,
    check_token_ids,
    new_slot,
)

__all__ = [
    "HashAlgo",
    "InvalidExtraKey",
    "PrefixCachingBlockManager",
    "builtin_block",
    "builtin_chain",
    "root_hash",
    "sha256_block",
    "sha256_chain",
]

HashFn = Callable[[int, list[int]], int]
BlockHash = Callable[[int, Sequence[int]], int]  # (parent's name, a block's ids) -> its name
Key = tuple[int | bytes, tuple[int, ...]]  # (parent identity or root key, a block's ids)
HashAlgo = Literal["sha256", "builtin"]


class InvalidExtraKey(KVCacheError, TypeError):
    """An ``extra_key`` that is not None, a str or bytes."""


def root_hash(extra_key: bytes) -> int:
    """The parent hash of a sequence's first block: SHA-256 of the extra key, so sequences
    with different keys (cache salts, adapters) never share a block."""
    digest = hashlib.sha256(b"servelab-prefix-root\0" + extra_key).digest()
    return int.from_bytes(digest, "big")


def sha256_block(parent: int, tokens: Sequence[int]) -> int:
    """The name of one full block: SHA-256 over the parent's 32 bytes, a tag, and the block's
    ids as 8-byte unsigned ints (a block with an id of 2**64 or above, which no vocabulary
    has, takes a longer tagged encoding, so the input stays unambiguous)."""
    try:
        raw = b"Q" + array("Q", tokens).tobytes()
    except OverflowError:
        raw = b"L" + ",".join(map(str, tokens)).encode()
    return int.from_bytes(hashlib.sha256(parent.to_bytes(32, "big") + raw).digest(), "big")


def builtin_block(parent: int, tokens: Sequence[int]) -> int:
    """The name of one full block by Python's ``hash`` of ``(parent, tokens)``: fast, collides."""
    return hash((parent, tuple(tokens)))


def _chain(block_hash: BlockHash, parent: int, tokens: Sequence[int], size: int) -> list[int]:
    out = []
    for i in range(0, len(tokens) // size * size, size):
        parent = block_hash(parent, tuple(tokens[i : i + size]))
        out.append(parent)
    return out


def sha256_chain(parent: int, tokens: Sequence[int], block_size: int) -> list[int]:
    """The names (:func:`sha256_block`) of the full blocks of ``tokens``, from ``parent``."""
    return _chain(sha256_block, parent, tokens, block_size)


def builtin_chain(parent: int, tokens: Sequence[int], block_size: int) -> list[int]:
    """The names (:func:`builtin_block`) of the full blocks of ``tokens``, from ``parent``."""
    return _chain(builtin_block, parent, tokens, block_size)


def _with_list(fn: HashFn) -> BlockHash:
    def block_hash(parent: int, tokens: Sequence[int]) -> int:
        return fn(parent, list(tokens))

    return block_hash


def _check_extra_key(extra_key: object) -> bytes:
    if extra_key is None:
        return b""
    if isinstance(extra_key, str):
        return extra_key.encode()
    if isinstance(extra_key, bytes):
        return extra_key
    raise InvalidExtraKey(f"extra_key must be None, a str or bytes, got {extra_key!r}")


class PrefixCachingBlockManager(BlockTables):
    """A block manager that knows its sequences' token ids and shares equal prefixes.

    Same tables, refcounts, fork and copy-on-write as
    :class:`~servelab.kv.blocks.BlockManager`; ``allocate`` takes token ids and returns how
    many leading tokens were found in the cache, and ``append_slot`` takes the new token id.
    ``hash_algo`` names the blocks (see the module docstring): ``"sha256"`` (default),
    ``"builtin"``, or a callable ``(parent_hash, block_tokens) -> int``. A prefix is named
    once, when it is first seen; hits are found by prefix identity and never hash.
    """

    def __init__(
        self, num_blocks: int, block_size: int, *, hash_algo: HashAlgo | HashFn = "sha256"
    ) -> None:
        super().__init__(num_blocks, block_size)
        self._block_hash: BlockHash
        if hash_algo == "sha256":
            self._block_hash = sha256_block
        elif hash_algo == "builtin":
            self._block_hash = builtin_block
        elif callable(hash_algo):
            self._block_hash = _with_list(hash_algo)
        else:
            raise InvalidConfig(
                f"hash_algo must be 'sha256', 'builtin' or a callable, got {hash_algo!r}"
            )
        self.hash_algo = hash_algo
        self._free: deque[int] = deque(range(num_blocks))  # unhashed, ready to use
        self._evictable: OrderedDict[int, None] = OrderedDict()  # hashed, refcount 0; LRU first
        self._hash: list[int | None] = [None] * num_blocks  # the name a block holds, if any
        self._ident: list[int] = [0] * num_blocks  # every full block's identity; 0: none
        # Interned identities: (parent identity or root key, tokens) -> identity, and back
        # to [refs (blocks carrying it + child identities), key, name].
        self._idents: dict[Key, int] = {}
        self._ident_rec: dict[int, list[object]] = {}
        self._next_ident = 1
        self._cached: dict[int, int] = {}  # name -> the block holding it
        self._named: dict[Key, int] = {}  # identity key -> the block holding its name
        self._seq_tokens: dict[int, list[int]] = {}
        self._seq_key: dict[int, bytes] = {}  # each sequence's extra key
        self._roots: dict[bytes, int] = {b"": root_hash(b"")}
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

    def num_cached_tokens(self, token_ids: Sequence[int], *, extra_key: object = None) -> int:
        """Leading tokens of ``token_ids`` that ``allocate`` would find cached (no side effects)."""
        tokens = check_token_ids(token_ids)
        key = _check_extra_key(extra_key)
        return len(self._lookup(tokens, key)) * self.block_size

    def can_allocate(self, token_ids: Sequence[int], *, extra_key: object = None) -> bool:
        """Whether ``allocate`` of a new sequence with these tokens would succeed now."""
        tokens = check_token_ids(token_ids)
        key = _check_extra_key(extra_key)
        hits = self._lookup(tokens, key)
        return -(-len(tokens) // self.block_size) - len(hits) <= self._available(hits)

    # ---------------------------------------------------------------- mutations
    def allocate(self, seq: int, token_ids: Sequence[int], *, extra_key: object = None) -> int:
        """Give ``seq`` blocks for its prompt, reusing cached ones; return the cached tokens.

        All or nothing: OutOfBlocks (changing nothing) if the blocks that are not cached
        do not fit. The returned count is a multiple of ``block_size`` and below
        ``len(token_ids)``. Sequences with different ``extra_key`` s (None, a str or bytes)
        never share a block.
        """
        if type(seq) is not int:
            seq = check_seq_id(seq)
        if seq in self._tables:
            raise SequenceExists(f"sequence {seq} is already allocated; free_seq({seq}) first")
        tokens = check_token_ids(token_ids)
        key = b"" if extra_key is None else _check_extra_key(extra_key)
        size = self.block_size
        n_tokens = len(tokens)
        # The lookup, inline: the longest run of named blocks that continue the prefix.
        named, idents = self._named, self._ident
        hits: list[int] = []
        parent: int | bytes = key
        for start in range(0, (n_tokens - 1) // size * size if n_tokens else 0, size):
            block = named.get((parent, tuple(tokens[start : start + size])))
            if block is None:
                break
            hits.append(block)
            parent = idents[block]
        n_hits = len(hits)
        n_blocks = -(-n_tokens // size)
        need = n_blocks - n_hits
        ref, evictable, free = self._ref, self._evictable, self._free
        if need > len(free) + len(evictable):  # the cheap test first; then count revivals
            available = self._available(hits)
            raise OutOfBlocks(
                f"sequence {seq} needs {need} new blocks ({n_hits} cached), "
                f"only {available} can be freed"
            )
        if evictable and need > self._available(hits):
            raise OutOfBlocks(
                f"sequence {seq} needs {need} new blocks ({n_hits} cached), "
                f"only {self._available(hits)} can be freed"
            )
        self.queried_blocks += (n_tokens - 1) // size if n_tokens else 0
        self.hit_blocks += n_hits
        for block in hits:  # claim hits first so eviction below cannot take them
            if ref[block]:
                ref[block] += 1
            else:
                del evictable[block]
                ref[block] = 1
        table = hits
        register = self._register
        start = n_hits * size
        for _ in range(need):
            if free:
                block = free.popleft()
            else:
                block = evictable.popitem(last=False)[0]
                self._unregister(block)
            ref[block] = 1
            table.append(block)
            if start + size <= n_tokens:
                parent = register(block, (parent, tuple(tokens[start : start + size])))
                start += size
        self._tables[seq] = table
        self._seq_tokens[seq] = tokens
        self._seq_key[seq] = key
        return n_hits * size

    def append_slot(self, seq: int, token_id: int) -> Slot:
        """Reserve the slot of ``token_id`` at the end of ``seq`` (copy-on-write as needed).

        When the token fills its block, the block is named and enters the cache.
        """
        tokens = self._seq_tokens.get(seq) if type(seq) is int else None
        if tokens is None:
            seq = self._live_id(seq)
            tokens = self._seq_tokens[seq]
        if type(token_id) is not int or token_id < 0:
            token_id = check_token_id(token_id)
        table = self._tables[seq]
        size = self.block_size
        offset = len(tokens) % size
        if offset and self._ref[table[-1]] == 1:  # the common case: our own partial tail
            tokens.append(token_id)
            if offset == size - 1:
                self._register_tail(seq, table, tokens)
            return new_slot(Slot, (table[-1], offset, None))
        cow_src = self._grow_or_copy(seq, table, len(tokens))
        tokens.append(token_id)
        if offset == size - 1:
            self._register_tail(seq, table, tokens)
        return new_slot(Slot, (table[-1], offset, cow_src))

    def free_seq(self, seq: int) -> None:
        """Drop ``seq`` and release its blocks, tail first; a block is free again when its
        refcount reaches zero. Freeing an unknown (or already freed) id raises
        UnknownSequence."""
        table = self._tables.pop(seq, None) if type(seq) is int else None
        if table is None:
            table = self._tables.pop(self._live_id(seq))
        del self._seq_tokens[seq], self._seq_key[seq]
        ref, hashes, evictable, free = self._ref, self._hash, self._evictable, self._free
        for block in reversed(table):  # tail first, as prefix caching wants it
            if ref[block] > 1:
                ref[block] -= 1
                continue
            ref[block] = 0
            if hashes[block] is not None:
                evictable[block] = None
            else:
                if self._ident[block]:
                    self._drop_ident(block)  # a private full block: nothing to keep
                free.append(block)

    # --------------------------------------------------------------- inspection
    def seq_len(self, seq: int) -> int:
        """Tokens of ``seq`` that have a slot."""
        self._table_of(seq)
        return len(self._seq_tokens[seq])

    def token_ids(self, seq: int) -> list[int]:
        """A copy of ``seq``'s token ids."""
        self._table_of(seq)
        return list(self._seq_tokens[seq])

    def block_hash(self, block: int) -> int | None:
        """The cache key ``block`` is registered under, or None."""
        return self._hash[self._check_block(block)]

    def block_tokens(self, block: int) -> list[int] | None:
        """The token ids a registered ``block`` holds, or None."""
        block = self._check_block(block)
        if self._hash[block] is None:
            return None
        return list(self._key_of(self._ident[block])[1])

    def free_list(self) -> list[int]:
        """Every allocatable block in allocation order: plain free ones, then evictable."""
        return [*self._free, *self._evictable]

    def evictable(self) -> list[int]:
        """Cached blocks no sequence holds, least recently freed first."""
        return list(self._evictable)

    def cached(self) -> dict[int, int]:
        """A copy of the cache map: hash -> block."""
        return dict(self._cached)

    # ----------------------------------------------------------------- helpers
    def _key_of(self, ident: int) -> Key:
        key = self._ident_rec[ident][1]
        assert isinstance(key, tuple)
        return key

    def _register_tail(self, seq: int, table: list[int], tokens: list[int]) -> None:
        """The last block of ``seq`` just filled: name it and enter it in the cache."""
        parent = self._ident[table[-2]] if len(table) > 1 else self._seq_key[seq]
        self._register(table[-1], (parent, tuple(tokens[-self.block_size :])))

    def _root(self, key: bytes) -> int:
        root = self._roots.get(key)
        if root is None:
            root = self._roots[key] = root_hash(key)
        return root

    def _lookup(self, tokens: list[int], key: bytes) -> list[int]:
        """The cached blocks that continue this sequence's prefix, from its first block
        (capped so that the last token is always computed)."""
        size, named, idents = self.block_size, self._named, self._ident
        hits: list[int] = []
        parent: int | bytes = key
        for start in range(0, (len(tokens) - 1) // size * size if tokens else 0, size):
            block = named.get((parent, tuple(tokens[start : start + size])))
            if block is None:
                break
            hits.append(block)
            parent = idents[block]
        return hits

    def _available(self, hits: list[int]) -> int:
        ref = self._ref
        claimed = sum(1 for b in hits if ref[b] == 0)  # evictable hits stop being free
        return self.num_free - claimed

    def _take(self) -> int:
        if self._free:
            block = self._free.popleft()
        else:
            block, _ = self._evictable.popitem(last=False)
            self._unregister(block)
        self._ref[block] = 1
        return block

    def _unregister(self, block: int) -> None:
        """Take an evicted ``block`` out of the cache: no name, no identity."""
        h = self._hash[block]
        if h is not None:
            del self._cached[h]
            del self._named[self._key_of(self._ident[block])]
            self._hash[block] = None
        self._drop_ident(block)

    def _register(self, block: int, key: Key) -> int:
        """Give a full ``block`` the identity ``key`` stands for (its parent's identity or
        root key, its ids) and, if that prefix's name is free, enter it in the cache under
        the name; return the identity (its children chain on it)."""
        ident = self._idents.get(key)
        if ident is None:  # a new prefix: intern it and name it, once
            parent = key[0]
            if type(parent) is int:
                parent_rec = self._ident_rec[parent]
                parent_rec[0] += 1  # type: ignore[operator]  # the parent lives while its child does
                parent_hash = parent_rec[2]
            else:
                assert isinstance(parent, bytes)
                parent_hash = self._root(parent)
            assert isinstance(parent_hash, int)
            ident = self._next_ident
            self._next_ident = ident + 1
            self._idents[key] = ident
            h = self._block_hash(parent_hash, key[1])
            self._ident_rec[ident] = [1, key, h]
        else:
            rec = self._ident_rec[ident]
            rec[0] += 1  # type: ignore[operator]
            if key in self._named:  # a twin: the cached block keeps the name
                self._ident[block] = ident
                return ident
            h = rec[2]
        self._ident[block] = ident
        if h not in self._cached:  # else a collision holds the name: stay private
            self._cached[h] = block  # type: ignore[index]
            self._named[key] = block
            self._hash[block] = h  # type: ignore[assignment]
        return ident

    def _drop_ident(self, block: int) -> None:
        """``block`` stops carrying its identity; drop identities nothing refers to."""
        ident = self._ident[block]
        self._ident[block] = 0
        recs = self._ident_rec
        while ident:
            rec = recs[ident]
            refs = rec[0] - 1  # type: ignore[operator]
            if refs:
                rec[0] = refs
                return
            del recs[ident]
            key = rec[1]
            del self._idents[key]  # type: ignore[arg-type]
            parent = key[0]  # type: ignore[index]
            ident = parent if type(parent) is int else 0

    def _release(self, block: int) -> None:
        self._ref[block] -= 1
        if self._ref[block] == 0:
            if self._hash[block] is not None:
                self._evictable[block] = None
            else:
                if self._ident[block]:
                    self._drop_ident(block)  # a private full block: nothing to keep
                self._free.append(block)

    def _copy_seq(self, parent: int, child: int) -> None:
        self._seq_tokens[child] = list(self._seq_tokens[parent])
        self._seq_key[child] = self._seq_key[parent]

    def _forget(self, seq: int) -> None:
        del self._seq_tokens[seq], self._seq_key[seq]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, "
            f"block_size={self.block_size}, free={len(self._free)}, "
            f"evictable={len(self._evictable)}, cached={len(self._cached)}, "
            f"sequences={len(self._tables)})"
        )
