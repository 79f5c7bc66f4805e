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
    "builtin_chain",
    "root_hash",
    "sha256_chain",
]

HashFn = Callable[[int, list[int]], int]
HashAlgo = Literal["sha256", "builtin"]


class InvalidExtraKey(KVCacheError, TypeError):
    """An ``extra_key`` that is not None, a str or bytes."""


def root_hash(extra_key: bytes) -> int:
    """The parent hash of a sequence's first block: SHA-256 of the extra key, so sequences
    with different keys (cache salts, adapters) never share a block."""
    digest = hashlib.sha256(b"servelab-prefix-root\0" + extra_key).digest()
    return int.from_bytes(digest, "big")


def sha256_chain(parent: int, tokens: Sequence[int], block_size: int) -> list[int]:
    """The chain hashes of the full blocks of ``tokens``, starting from ``parent``.

    Each is SHA-256 over the parent's 32 bytes, a tag, and the block's ids as 8-byte
    unsigned ints (ids of 2**64 and above, which no vocabulary has, take a longer tagged
    encoding, so the input stays unambiguous).
    """
    n = len(tokens) // block_size
    width = 8 * block_size
    try:
        raw = array("Q", tokens[: n * block_size]).tobytes()
        chunks = [b"Q" + raw[i : i + width] for i in range(0, n * width, width)]
    except OverflowError:
        chunks = [
            b"L" + ",".join(map(str, tokens[i : i + block_size])).encode()
            for i in range(0, n * block_size, block_size)
        ]
    sha256 = hashlib.sha256
    out = []
    digest = parent.to_bytes(32, "big")
    for chunk in chunks:
        digest = sha256(digest + chunk).digest()
        out.append(int.from_bytes(digest, "big"))
    return out


def builtin_chain(parent: int, tokens: Sequence[int], block_size: int) -> list[int]:
    """The chain hashes by Python's ``hash`` of ``(parent, block tuple)``: fast, collides."""
    out = []
    for i in range(0, len(tokens) // block_size * block_size, block_size):
        parent = hash((parent, tuple(tokens[i : i + block_size])))
        out.append(parent)
    return out


def _chain_with(fn: HashFn) -> Callable[[int, Sequence[int], int], list[int]]:
    def chain(parent: int, tokens: Sequence[int], block_size: int) -> list[int]:
        out = []
        for i in range(0, len(tokens) // block_size * block_size, block_size):
            parent = fn(parent, list(tokens[i : i + block_size]))
            out.append(parent)
        return out

    return chain


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
    ``hash_algo`` names the blocks' hash (see the module docstring): ``"sha256"``
    (default), ``"builtin"``, or a callable ``(parent_hash, block_tokens) -> int``.
    """

    def __init__(
        self, num_blocks: int, block_size: int, *, hash_algo: HashAlgo | HashFn = "sha256"
    ) -> None:
        super().__init__(num_blocks, block_size)
        self._chain: Callable[[int, Sequence[int], int], list[int]]
        if hash_algo == "sha256":
            self._chain = sha256_chain
        elif hash_algo == "builtin":
            self._chain = builtin_chain
        elif callable(hash_algo):
            self._chain = _chain_with(hash_algo)
        else:
            raise InvalidConfig(
                f"hash_algo must be 'sha256', 'builtin' or a callable, got {hash_algo!r}"
            )
        self.hash_algo = hash_algo
        self._free: deque[int] = deque(range(num_blocks))  # unhashed, ready to use
        self._evictable: OrderedDict[int, None] = OrderedDict()  # hashed, refcount 0; LRU first
        self._hash: list[int | None] = [None] * num_blocks
        self._tokens: list[list[int] | None] = [None] * num_blocks
        # A cached block's parent identity, or its root key (bytes) for a first block.
        self._parent: list[int | bytes | None] = [None] * num_blocks
        self._ident: list[int] = [0] * num_blocks  # every full block's identity; 0: none
        # Interned identities: (parent identity or root key, tokens) -> identity, and back.
        self._idents: dict[tuple[int | bytes, tuple[int, ...]], int] = {}
        self._ident_key: dict[int, tuple[int | bytes, tuple[int, ...]]] = {}
        self._ident_refs: dict[int, int] = {}  # blocks carrying it + child identities
        self._next_ident = 1
        self._cached: dict[int, int] = {}  # hash -> block
        self._seq_tokens: dict[int, list[int]] = {}
        self._seq_hashes: dict[int, list[int]] = {}  # chain hash of each full block
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
        return len(self._lookup(tokens, key, self._hashes(tokens, key))) * self.block_size

    def can_allocate(self, token_ids: Sequence[int], *, extra_key: object = None) -> bool:
        """Whether ``allocate`` of a new sequence with these tokens would succeed now."""
        tokens = check_token_ids(token_ids)
        key = _check_extra_key(extra_key)
        hits = self._lookup(tokens, key, self._hashes(tokens, key))
        return -(-len(tokens) // self.block_size) - len(hits) <= self._available(hits)

    # ---------------------------------------------------------------- mutations
    def allocate(self, seq: int, token_ids: Sequence[int], *, extra_key: object = None) -> int:
        """Give ``seq`` blocks for its prompt, reusing cached ones; return the cached tokens.

        All or nothing: OutOfBlocks (changing nothing) if the blocks that are not cached
        do not fit. The returned count is a multiple of ``block_size`` and below
        ``len(token_ids)``. Sequences with different ``extra_key`` s (None, a str or bytes)
        never share a block.
        """
        seq = check_seq_id(seq)
        if seq in self._tables:
            raise SequenceExists(f"sequence {seq} is already allocated; free_seq({seq}) first")
        tokens = check_token_ids(token_ids)
        key = _check_extra_key(extra_key)
        hashes = self._hashes(tokens, key)
        hits = self._lookup(tokens, key, hashes)
        size, n_hits = self.block_size, len(hits)
        n_blocks = -(-len(tokens) // size)
        need = n_blocks - n_hits
        available = self._available(hits)
        if need > available:
            raise OutOfBlocks(
                f"sequence {seq} needs {need} new blocks ({n_hits} cached), "
                f"only {available} can be freed"
            )
        self.queried_blocks += (len(tokens) - 1) // size if tokens else 0
        self.hit_blocks += n_hits
        ref, evictable = self._ref, self._evictable
        for block in hits:  # claim hits first so eviction below cannot take them
            if ref[block] == 0:
                del evictable[block]
            ref[block] += 1
        table = hits
        parent: int | bytes = self._ident[hits[-1]] if hits else key
        for i in range(n_hits, n_blocks):
            block = self._take()
            table.append(block)
            if i < len(hashes):
                parent = self._register(
                    block, hashes[i], tokens[i * size : i * size + size], parent
                )
        self._tables[seq] = table
        self._seq_tokens[seq] = tokens
        self._seq_hashes[seq] = hashes
        self._seq_key[seq] = key
        return n_hits * size

    def append_slot(self, seq: int, token_id: int) -> Slot:
        """Reserve the slot of ``token_id`` at the end of ``seq`` (copy-on-write as needed).

        When the token fills its block, the block is hashed and enters the cache.
        """
        tokens = self._seq_tokens.get(seq) if type(seq) is int else None
        if tokens is None:
            seq = self._live_id(seq)
            tokens = self._seq_tokens[seq]
        if type(token_id) is not int or token_id < 0:
            token_id = check_token_id(token_id)
        table = self._tables[seq]
        n, size = len(tokens), self.block_size
        offset = n % size
        cow_src = None
        if offset == 0 or self._ref[table[-1]] > 1:
            cow_src = self._grow_or_copy(seq, table, n)
        tokens.append(token_id)
        if offset == size - 1:
            self._register_tail(seq, table, tokens)
        return new_slot(Slot, (table[-1], offset, cow_src))

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
        tokens = self._tokens[self._check_block(block)]
        return None if tokens is None else list(tokens)

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
    def _register_tail(self, seq: int, table: list[int], tokens: list[int]) -> None:
        """The last block of ``seq`` just filled: name it and enter it in the cache."""
        size = self.block_size
        hashes = self._seq_hashes[seq]
        block_tokens = tokens[-size:]
        key = self._seq_key[seq]
        if hashes:
            (h,) = self._chain(hashes[-1], block_tokens, size)
            parent: int | bytes = self._ident[table[-2]]
        else:
            (h,) = self._chain(self._root(key), block_tokens, size)
            parent = key
        hashes.append(h)
        self._register(table[-1], h, block_tokens, parent)

    def _root(self, key: bytes) -> int:
        root = self._roots.get(key)
        if root is None:
            root = self._roots[key] = root_hash(key)
        return root

    def _hashes(self, tokens: list[int], key: bytes) -> list[int]:
        """Chain hashes of every full block of ``tokens``."""
        return self._chain(self._root(key), tokens, self.block_size)

    def _lookup(self, tokens: list[int], key: bytes, hashes: list[int]) -> list[int]:
        """The cached blocks that continue this sequence's chain, from its first block."""
        size = self.block_size
        hittable = min((len(tokens) - 1) // size, len(hashes)) if tokens else 0
        cached, stored, parents, idents = self._cached, self._tokens, self._parent, self._ident
        hits: list[int] = []
        expect: int | bytes = key
        for i in range(hittable):
            block = cached.get(hashes[i])
            if (
                block is None
                or parents[block] != expect
                or stored[block] != tokens[i * size : i * size + size]
            ):
                break
            hits.append(block)
            expect = idents[block]
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
        if h is not None and self._cached.get(h) == block:
            del self._cached[h]
        self._hash[block] = None
        self._tokens[block] = None
        self._parent[block] = None
        self._drop_ident(block)

    def _register(self, block: int, h: int, tokens: list[int], parent: int | bytes) -> int:
        """Give a full ``block`` the identity of its whole prefix and, if its name is free,
        enter it in the cache under ``h``; return the identity (its children chain on it)."""
        key = (parent, tuple(tokens))
        ident = self._idents.setdefault(key, self._next_ident)
        refs = self._ident_refs
        if ident == self._next_ident:  # a new prefix
            self._next_ident += 1
            self._ident_key[ident] = key
            refs[ident] = 1
            if type(parent) is int:
                refs[parent] += 1  # the parent identity lives while its child does
        else:
            refs[ident] += 1
        self._ident[block] = ident
        if h not in self._cached:  # else a twin or a collision holds the name: stay private
            self._cached[h] = block
            self._hash[block] = h
            self._tokens[block] = tokens
            self._parent[block] = parent
        return ident

    def _drop_ident(self, block: int) -> None:
        """``block`` stops carrying its identity; drop identities nothing refers to."""
        ident = self._ident[block]
        self._ident[block] = 0
        refs = self._ident_refs
        while ident:
            refs[ident] -= 1
            if refs[ident]:
                return
            del refs[ident]
            key = self._ident_key.pop(ident)
            del self._idents[key]
            parent = key[0]
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
        self._seq_hashes[child] = list(self._seq_hashes[parent])
        self._seq_key[child] = self._seq_key[parent]

    def _forget(self, seq: int) -> None:
        del self._seq_tokens[seq], self._seq_hashes[seq], self._seq_key[seq]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, "
            f"block_size={self.block_size}, free={len(self._free)}, "
            f"evictable={len(self._evictable)}, cached={len(self._cached)}, "
            f"sequences={len(self._tables)})"
        )
