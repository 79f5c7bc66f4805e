"""Prefix caching: reuse the KV blocks of a prompt prefix that another request already computed.

Identity of a block. Only *full* blocks are cached. What decides a hit is a block's *prefix
identity*, a small int that stands for its whole prefix exactly. Identities are interned:
the identity of a block is looked up by the exact pair (its parent's identity, its token
ids) in a dict, which compares keys by equality, so two blocks share an identity if and
only if their whole prefixes (and root keys: a first block's parent is the sequence's
``extra_key``, a cache salt or an adapter id) are equal. The ids in a key are packed as
8-byte unsigned ints (``bytes``, cut from the array that validated the prompt): a bytes
object caches its hash and compares with one ``memcmp``, so dropping a cold identity never
reads its ints back from scattered memory, as a tuple key's hash would (an id of 2**64 or
above, which no vocabulary has, makes its block's key a tuple). A lookup walks the
sequence's blocks from the first, probing the dict with (the identity matched so far, the
next block's ids); the interned entry records the cached block, if any, that holds that
prefix.
By induction from the first block, a hit's whole prefix equals the sequence's, whatever
the hash does: a hit needs no hashing at all.

The name of a block is a hash of its token ids chained with its parent's name (the first
block chains on a root derived from the ``extra_key``): what a cache shares with the
outside world (vLLM publishes it in its KV events and keys its KV connectors by it), and
what :meth:`~PrefixCachingBlockManager.block_hash` and
:meth:`~PrefixCachingBlockManager.cached` report. Since the name is a function of the
identity, it is computed once per new identity, when a prefix is first seen, and stored with
it: a prompt whose blocks hit pays for no hash, a block that fills pays for one.

Every full block gets an identity, cached or not, so the cache reuses as much as a
content-addressed one: a *twin* (a private block equal to a cached one, e.g. the last
block of a one-block prompt, which is always computed) chains its children on the shared
identity, and a child stays reachable after its parent is evicted and an equal prefix is
computed again. The map holds one block per name (vLLM v1 keeps several; one is enough
to serve every hit): on a collision, or when an equal twin is already cached, the block
already cached keeps the name and the newcomer stays private (plain free once released).
An identity lives while a block carries it or a child identity refers to it, so at most
one per prefix of a block that holds one.

The hash that names blocks, and the callables ``hash_algo`` may be, are in
:mod:`servelab.kv.block_hash`.

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

Costs. Lookup is a dict probe per block (a slice of the packed prompt: hashed and compared
in C); a block that fills interns its identity (its packed ids and a dict probe) and, if the
prefix is new, hashes once; a hit on an evictable block is an ``OrderedDict`` delete, and eviction
is ``popitem(last=False)`` plus dropping the identity (a chain of identities nothing refers
to any more is dropped at once, each of them once: O(1) amortized). Every operation is
O(1) per block it touches, with no list scans (a ``deque.remove`` would be O(n) in the pool
size). Fork and copy-on-write are :class:`~servelab.kv.blocks.BlockTables`'.

Engine interface::

    cached = bm.allocate(seq, prompt_ids)   # tokens [0, cached) already hold KV
    # compute KV for prompt_ids[cached:], write it via bm.block_table(seq)
    slot = bm.append_slot(seq, next_id)     # a block is cached when it becomes full

``allocate`` caps the hit at ``(len - 1) // block_size`` whole blocks, so at least the last
prompt token is always computed (its logits start decoding) and no write ever lands in a
shared cached block. A block is registered in the cache when its last slot is reserved,
before its KV is written: a prompt's full blocks at ``allocate``, a block that a token fills
at ``append_slot``. The caller must write that KV before any attention reads the block: a
prompt allocated later may hit it at once. The engine runs a step's decodes before its
prefills, and its prefills in allocation order, for this reason.
"""

from __future__ import annotations

import struct
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from operator import itemgetter
from typing import Any

from servelab.kv import prefix_undo
from servelab.kv.block_hash import (
    BlockIds,
    HashAlgo,
    HashFn,
    InvalidBlockHash,
    builtin_block,
    builtin_chain,
    checked,
    on_ints,
    root_hash,
    sha256_block,
    sha256_chain,
    sha256_name,
    unpacked,
)
from servelab.kv.blocks import (
    BlockTables,
    InvalidConfig,
    KVCacheError,
    OutOfBlocks,
    SequenceExists,
    Slot,
    StepSlots,
    check_seq_id,
    check_token_id,
    new_slot,
    pack_token_ids,
)
from servelab.native import mypyc_attr

__all__ = [
    "HashAlgo",
    "InvalidBlockHash",
    "InvalidExtraKey",
    "PrefixCachingBlockManager",
    "builtin_block",
    "builtin_chain",
    "root_hash",
    "sha256_block",
    "sha256_chain",
]

Key = tuple[int | bytes, BlockIds]  # (parent identity or root key, a block's ids)


# Compiled (servelab.native), an exception class with two bases is a plain Python class.
@mypyc_attr(native_class=False)
class InvalidExtraKey(KVCacheError, TypeError):
    """An ``extra_key`` that is not None, a str or bytes."""


# Compiled (servelab.native), serializable so that copy.deepcopy of a manager works as in Python.
@mypyc_attr(serializable=True)
class _Prefix:
    """An interned prefix identity: what every full block with this whole prefix carries."""

    __slots__ = ("block", "ident", "key", "name", "parent", "refs")

    def __init__(self, key: Key, ident: int, name: Any, parent: _Prefix | None) -> None:
        self.key = key  # (parent's ident or the root key, the block's ids): its dict key
        self.ident = ident  # a small int, unique among live prefixes: its children's keys
        self.name = name  # the hash that names it, computed once
        self.parent = parent  # the prefix one block shorter (None for a first block)
        self.refs = 1  # blocks carrying it + child prefixes; dropped at 0
        self.block = -1  # the block that holds its name in the cache, if any


def _as_int(name: Any) -> int:
    """A name as the int the public calls return (SHA-256 digests are kept as bytes)."""
    return int.from_bytes(name, "big") if type(name) is bytes else int(name)


def _sha256_root(key: bytes) -> bytes:
    """The root name of a chain of SHA-256 names, as 32 bytes like the names after it."""
    return root_hash(key).to_bytes(32, "big")


def _check_extra_key(extra_key: object) -> bytes:
    if extra_key is None:
        return b""
    if isinstance(extra_key, str):
        return extra_key.encode()
    if isinstance(extra_key, bytes):
        return extra_key
    raise InvalidExtraKey(f"extra_key must be None, a str or bytes, got {extra_key!r}")


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class PrefixCachingBlockManager(BlockTables):
    """A block manager that knows its sequences' token ids and shares equal prefixes.

    Same tables, refcounts, fork and copy-on-write as
    :class:`~servelab.kv.blocks.BlockManager`; ``allocate`` takes token ids and returns how
    many leading tokens were found in the cache, and ``append_slot`` takes the new token id.
    ``hash_algo`` names the blocks (see :mod:`servelab.kv.block_hash`): ``"sha256"``
    (default), ``"builtin"``, or a callable ``(parent_hash, block_tokens) -> int``. A prefix
    is named once, when it is first seen; hits are found by prefix identity, with no hashing.
    A callable is called before a call changes anything, so one that raises, or returns
    something other than an int (InvalidBlockHash), leaves the manager as it was.
    """

    def __init__(
        self, num_blocks: object, block_size: object, *, hash_algo: HashAlgo | HashFn = "sha256"
    ) -> None:
        super().__init__(num_blocks, block_size)
        # Names are kept in their native form: SHA-256 digests as 32 bytes (their int is made
        # only for block_hash and cached), the other hashes as ints.
        self._name_block: Callable[[Any, BlockIds], Any]
        self._root_name: Callable[[bytes], Any]
        if hash_algo == "sha256":
            self._name_block = sha256_name
            self._root_name = _sha256_root
        elif hash_algo == "builtin":
            self._name_block = on_ints(builtin_block)
            self._root_name = root_hash
        elif callable(hash_algo):
            self._name_block = checked(hash_algo)
            self._root_name = root_hash
        else:
            raise InvalidConfig(
                f"hash_algo must be 'sha256', 'builtin' or a callable, got {hash_algo!r}"
            )
        self.hash_algo = hash_algo
        # A callable may raise or return a bad name: each call then names its new blocks
        # before it changes anything. The built-in hashes cannot fail and skip that pass.
        self._names_first = callable(hash_algo)
        # A block's ids, as its key (a ``partial``, where a Struct's ``pack`` would not pickle)
        self._pack: Callable[..., bytes] = partial(struct.pack, f"={self.block_size}Q")
        self._free: deque[int] = deque(range(self.num_blocks))  # unhashed, ready to use
        self._evictable: OrderedDict[int, None] = OrderedDict()  # hashed, refcount 0; LRU first
        self._hash: list[Any] = [None] * self.num_blocks  # the name a block holds, if any
        self._prefix: list[_Prefix | None] = [None] * self.num_blocks  # every full block's identity
        self._idents: dict[Key, _Prefix] = {}  # interned: (parent ident or root key, ids)
        self._next_ident = 1
        self._cached: dict[Any, int] = {}  # name -> the block holding it
        # Each sequence's token ids, its block table (the list in _tables) and its extra key:
        # one probe for append_slot.
        self._seqs: dict[int, tuple[list[int], list[int], bytes]] = {}
        self._roots: dict[bytes, Any] = {}  # root key -> its name
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
        tokens, packed = pack_token_ids(token_ids)
        key = _check_extra_key(extra_key)
        return len(self._lookup(tokens, packed, key)) * self.block_size

    def can_allocate(self, token_ids: Sequence[int], *, extra_key: object = None) -> bool:
        """Whether ``allocate`` of a new sequence with these tokens would succeed now."""
        tokens, packed = pack_token_ids(token_ids)
        key = _check_extra_key(extra_key)
        hits = self._lookup(tokens, packed, key)
        return -(-len(tokens) // self.block_size) - len(hits) <= self._available(hits)

    def num_blocks_taken(self, token_ids: Sequence[int], *, extra_key: object = None) -> int:
        """How far ``allocate`` of these tokens would lower ``num_free`` now: the new blocks
        plus the cached hits that are free (a revived block stops being free), as vLLM v1's
        ``get_num_blocks_to_allocate`` counts them. No side effects."""
        tokens, packed = pack_token_ids(token_ids)
        hits = self._lookup(tokens, packed, _check_extra_key(extra_key))
        return (
            -(-len(tokens) // self.block_size) - len(hits) + self.num_free - self._available(hits)
        )

    # ---------------------------------------------------------------- mutations
    def allocate(self, seq: object, token_ids: Sequence[int], *, extra_key: object = None) -> int:
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
        tokens, packed = pack_token_ids(token_ids)
        key = b"" if extra_key is None else _check_extra_key(extra_key)
        size = self.block_size
        n_tokens = len(tokens)
        # The lookup (as _lookup), inline: the named blocks that continue the prefix.
        idents, ref = self._idents, self._ref
        hits: list[int] = []
        revived = 0  # hits on evictable blocks: they stop being free
        parent: _Prefix | None = None
        for start in range(0, (n_tokens - 1) // size * size if n_tokens else 0, size):
            block_ids = (
                packed[8 * start : 8 * (start + size)]
                if packed is not None
                else self._block_ids(tokens[start : start + size])
            )
            prefix = idents.get((key if parent is None else parent.ident, block_ids))
            if prefix is None or prefix.block < 0:
                break
            hits.append(prefix.block)
            if not ref[prefix.block]:
                revived += 1
            parent = prefix
        n_hits = len(hits)
        need = -(-n_tokens // size) - n_hits
        free, evictable = self._free, self._evictable
        if need > len(free) + len(evictable) - revived:
            raise OutOfBlocks(
                f"sequence {seq} needs {need} new blocks ({n_hits} cached), "
                f"only {len(free) + len(evictable) - revived} can be freed"
            )
        names = None
        if self._names_first:  # before anything changes: the hash may fail
            start = n_hits * size
            full = range(start, n_tokens // size * size, size)
            names = self._names_ahead(parent, key, [self._key_ids(tokens, packed, i) for i in full])
        self.queried_blocks += (n_tokens - 1) // size if n_tokens else 0
        self.hit_blocks += n_hits
        for block in hits:  # claim hits first so eviction below cannot take them
            if ref[block]:
                ref[block] += 1
            else:
                del evictable[block]
                ref[block] = 1
        table = hits
        start = n_hits * size
        for _ in range(need):
            if free:
                block = free.popleft()
            else:
                block = evictable.popitem(last=False)[0]
                self._evict(block)
            ref[block] = 1
            table.append(block)
            if start + size <= n_tokens:
                block_ids = (
                    packed[8 * start : 8 * (start + size)]
                    if packed is not None
                    else self._block_ids(tokens[start : start + size])
                )
                name = None if names is None else names[start // size - n_hits]
                parent = self._register(block, block_ids, parent, key, name)
                start += size
        self._tables[seq] = table
        self._seqs[seq] = (tokens, table, key)
        return n_hits * size

    def append_slot(self, seq: object, token_id: object) -> Slot:
        """Reserve the slot of ``token_id`` at the end of ``seq`` (copy-on-write as needed).

        When the token fills its block, the block is named and enters the cache.
        """
        sid = seq if type(seq) is int else self._live_id(seq)
        state = self._seqs.get(sid)
        if state is None:
            state = self._seqs[self._live_id(sid)]
        token = token_id if type(token_id) is int and token_id >= 0 else check_token_id(token_id)
        tokens, table, key = state
        size = self.block_size
        offset = len(tokens) % size
        if offset and self._ref[table[-1]] == 1:  # the common case: our own partial tail
            if offset == size - 1:  # it fills: name it, enter it in the cache
                name = self._tail_name(tokens, table, key, token) if self._names_first else None
                tokens.append(token)
                self._register_tail(sid, table, tokens, name)
            else:
                tokens.append(token)
            return new_slot(Slot, (table[-1], offset, None))
        return self._append_new_block(sid, tokens, table, token, offset)

    def append_slots(self, seqs: Sequence[int], token_ids: Sequence[int]) -> StepSlots:
        """One decode step: a slot for ``token_ids[i]`` at the end of ``seqs[i]``, for each
        ``i`` in order: the step's slot mapping and copy-on-write copies
        (:class:`~servelab.kv.blocks.StepSlots`), the slots ``append_slot`` would give one
        by one.

        All or nothing, checked in bulk before anything changes: a bad or unknown id, a
        sequence named twice (RepeatedInStep), a bad token id or too few free blocks for
        the whole step (OutOfBlocks) raises and changes nothing. One call per step saves a
        call, a validation and a ``Slot`` per sequence: most of what a per-token append
        costs.
        """
        ids, tokens = self._check_step(seqs, token_ids, tokens_required=True)
        assert tokens is not None
        states = self._seqs
        if len(self._free) + len(self._evictable) < len(ids):
            self._check_step_fits(ids, [len(states[s][0]) for s in ids])
        size, ref = self.block_size, self._ref
        last = size - 1
        names: dict[int, Any] | None = None
        seq: Any  # compiled, kept as the objects they are (see BlockManager.append_slots)
        token_id: Any
        if self._names_first:  # name every block this step fills before anything changes
            names = {}
            for seq, token_id in zip(ids, tokens, strict=True):
                seq_tokens, table, key = states[seq]
                if len(seq_tokens) % size == last:
                    names[seq] = self._tail_name(seq_tokens, table, key, token_id)
        slots: list[int] = []
        copies: list[tuple[int, int]] = []
        append = slots.append
        for seq, token_id in zip(ids, tokens, strict=True):
            seq_tokens, table, _ = states[seq]
            offset = len(seq_tokens) % size
            if offset and ref[table[-1]] == 1:  # our own partial tail, as in append_slot
                seq_tokens.append(token_id)
                if offset == last:
                    self._register_tail(
                        seq, table, seq_tokens, None if names is None else names[seq]
                    )
                append(table[-1] * size + offset)
            else:
                block, offset, cow_src = self._append_new_block(
                    seq,
                    seq_tokens,
                    table,
                    token_id,
                    offset,
                    None if names is None else names.get(seq),
                )
                append(block * size + offset)
                if cow_src is not None:
                    copies.append((cow_src, block))
        return StepSlots(slots, copies)

    def _append_new_block(
        self,
        seq: int,
        tokens: list[int],
        table: list[int],
        token_id: int,
        offset: int,
        name: Any = None,
    ) -> Slot:
        """``append_slot`` where the token needs a block: a copy of a shared partial tail, or
        a new block at a block boundary (OutOfBlocks, changing nothing, if none is free).
        ``name``: the block's name if the token fills it and ``append_slots`` named it."""
        size = self.block_size
        if offset == size - 1 and name is None and self._names_first:
            name = self._tail_name(tokens, table, self._seqs[seq][2], token_id)
        if offset:
            cow_src = self._grow_or_copy(seq, table, len(tokens))  # copy a shared tail
            tokens.append(token_id)
            if offset == size - 1:
                self._register_tail(seq, table, tokens, name)
            return new_slot(Slot, (table[-1], offset, cow_src))
        free = self._free
        if free:
            block = free.popleft()
        elif self._evictable:
            block = self._evictable.popitem(last=False)[0]
            self._evict(block)
        else:
            raise OutOfBlocks(f"sequence {seq} needs a new block at token {len(tokens)}; none free")
        self._ref[block] = 1
        table.append(block)
        tokens.append(token_id)
        if size == 1:
            self._register_tail(seq, table, tokens, name)
        return new_slot(Slot, (block, 0, None))

    # --------------------------------------------------------------- inspection
    def seq_len(self, seq: object) -> int:
        """Tokens of ``seq`` that have a slot."""
        state = self._seqs.get(seq) if type(seq) is int else None
        if state is None:
            state = self._seqs[self._live_id(seq)]
        return len(state[0])

    def token_ids(self, seq: object) -> list[int]:
        """A copy of ``seq``'s token ids."""
        return list(self._seqs[self._live_id(seq)][0])

    def block_hash(self, block: object) -> int | None:
        """The cache key ``block`` is registered under, or None."""
        name = self._hash[self._check_block(block)]
        return None if name is None else _as_int(name)

    def block_tokens(self, block: object) -> list[int] | None:
        """The token ids a registered ``block`` holds, or None."""
        prefix = self._prefix[self._check_block(block)]
        if prefix is None or prefix.block != block:
            return None
        return list(unpacked(prefix.key[1]))

    def free_list(self) -> list[int]:
        """Every allocatable block in allocation order: plain free ones, then evictable."""
        return [*self._free, *self._evictable]

    def evictable(self) -> list[int]:
        """Cached blocks no sequence holds, least recently freed first."""
        return list(self._evictable)

    def cached(self) -> dict[int, int]:
        """A copy of the cache map: hash -> block."""
        return {_as_int(name): block for name, block in self._cached.items()}

    # ----------------------------------------------------------------- helpers
    def _register_tail(
        self, seq: int, table: list[int], tokens: list[int], name: Any = None
    ) -> None:
        """The last block of ``seq`` just filled: name it (``name``, if named ahead) and enter
        it in the cache."""
        parent = self._prefix[table[-2]] if len(table) > 1 else None
        block_ids = self._block_ids(tokens[-self.block_size :])
        self._register(table[-1], block_ids, parent, self._seqs[seq][2], name)

    def _tail_name(self, tokens: list[int], table: list[int], root: bytes, token_id: int) -> Any:
        """The name of the block that ``token_id``, appended to ``tokens``, fills: computed
        before the append changes anything (see ``_names_ahead``)."""
        n = len(tokens)
        i = n // self.block_size  # the block the token fills; its parent is block i - 1
        parent = self._prefix[table[i - 1]] if i else None
        block_ids = self._block_ids([*tokens[n - self.block_size + 1 :], token_id])
        return self._names_ahead(parent, root, [block_ids])[0]

    def _names_ahead(
        self, parent: _Prefix | None, root: bytes, blocks: Iterable[BlockIds]
    ) -> list[Any]:
        """The names of a chain of full blocks that continues ``parent`` (the root key's chain
        if None), without changing anything: a known prefix gives its name, a new one is
        hashed. Names depend only on the prefix, so a prefix that an eviction drops before the
        commit re-interns under the name computed here: the commit never hashes."""
        idents, names = self._idents, []
        known: int | bytes | None = root if parent is None else parent.ident
        name = self._root(root) if parent is None else parent.name
        for block_ids in blocks:
            prefix = None if known is None else idents.get((known, block_ids))
            if prefix is None:  # new, and so is every prefix after it
                name = self._name_block(name, block_ids)
                known = None
            else:
                name, known = prefix.name, prefix.ident
            names.append(name)
        return names

    def _key_ids(self, tokens: list[int], packed: bytes | None, start: int) -> BlockIds:
        """The key of the block of ``tokens`` starting at ``start`` (``packed``: the tokens as
        ``pack_token_ids`` packed them). ``allocate`` spells this out inline: it is its hot
        loop."""
        size = self.block_size
        if packed is not None:
            return packed[8 * start : 8 * (start + size)]
        return self._block_ids(tokens[start : start + size])

    def _block_ids(self, ids: list[int]) -> BlockIds:
        """One block's ids as its key (see ``BlockIds``)."""
        try:
            return self._pack(*ids)
        except struct.error:  # an id of 2**64 or above
            return tuple(ids)

    def _root(self, key: bytes) -> Any:
        root = self._roots.get(key)
        if root is None:
            root = self._roots[key] = self._root_name(key)
        return root

    def _lookup(self, tokens: list[int], packed: bytes | None, key: bytes) -> list[int]:
        """The cached blocks that continue this sequence's prefix, from its first block
        (capped so that the last token is always computed)."""
        size, idents = self.block_size, self._idents
        hits: list[int] = []
        parent: int | bytes = key
        for start in range(0, (len(tokens) - 1) // size * size if tokens else 0, size):
            prefix = idents.get((parent, self._key_ids(tokens, packed, start)))
            if prefix is None or prefix.block < 0:
                break
            hits.append(prefix.block)
            parent = prefix.ident
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
            self._evict(block)
        self._ref[block] = 1
        return block

    def _register(
        self,
        block: int,
        block_ids: BlockIds,
        parent: _Prefix | None,
        root: bytes,
        name: Any = None,
    ) -> _Prefix:
        """Give a full ``block`` the identity of its whole prefix (``parent``'s, or the root
        key's for a first block, then ``block_ids``) and, if that prefix's name is free,
        enter the block in the cache under it; return the identity. ``name``: the prefix's
        name if it was computed ahead (``_names_ahead``); else a new prefix is hashed here,
        before anything changes."""
        key: Key = (root if parent is None else parent.ident, block_ids)
        prefix = self._idents.get(key)
        if prefix is None:  # a new prefix: intern it and name it, once
            if name is None:
                parent_name = self._root(root) if parent is None else parent.name
                name = self._name_block(parent_name, block_ids)
            if parent is not None:
                parent.refs += 1  # the parent lives while its child does
            ident = self._next_ident
            self._next_ident = ident + 1
            prefix = self._idents[key] = _Prefix(key, ident, name, parent)
        else:
            prefix.refs += 1
        self._prefix[block] = prefix
        # Else a twin holds the name (the cached block keeps it), or a colliding prefix
        # does: this block stays private.
        if prefix.block < 0 and prefix.name not in self._cached:
            self._cached[prefix.name] = block
            self._hash[block] = prefix.name
            prefix.block = block
        return prefix

    def _evict(self, block: int) -> None:
        """Take an evicted ``block`` (it holds a name) out of the cache: no name, no identity."""
        prefix = self._prefix[block]
        assert prefix is not None
        del self._cached[prefix.name]
        self._hash[block] = None
        prefix.block = -1
        self._unref(block)

    def _unref(self, block: int) -> None:
        """``block`` stops carrying its identity; drop identities nothing refers to (each
        drop releases its parent: O(1) amortized, each identity is dropped once)."""
        prefix = self._prefix[block]
        self._prefix[block] = None
        while prefix is not None:
            prefix.refs -= 1
            if prefix.refs:
                return
            del self._idents[prefix.key]
            prefix = prefix.parent

    def _release(self, block: int) -> None:
        self._release_all((block,))

    def _release_all(self, blocks: Iterable[int]) -> None:
        """``_release`` of every block of a freed table, in one loop: a long sequence frees
        many blocks, and a call per block was most of what freeing it cost."""
        ref, names, identities = self._ref, self._hash, self._prefix
        evictable, free = self._evictable, self._free
        for block in blocks:
            count = ref[block]
            if count > 1:
                ref[block] = count - 1
                continue
            ref[block] = 0
            if names[block] is not None:
                evictable[block] = None
            else:
                if identities[block] is not None:
                    self._unref(block)  # a private full block: nothing to keep
                free.append(block)

    def _snapshot(self) -> object:
        """Everything a call may change, for :meth:`_restore`: the undo point of a caller that
        makes several calls all or nothing (``Scheduler.step``). Taken on every step that
        admits, so it copies lists (a C copy each) and no dict: the interned identities and
        the cache map are rebuilt from the blocks by :meth:`_restore`, which only a failure
        pays for."""
        # A sequence's token ids only grow while it is live: their length is enough.
        lengths = list(map(len, map(itemgetter(0), self._seqs.values())))
        return (
            (self._ref[:], list(self._free), list(self._evictable), self._hash[:]),
            (self._prefix[:], list(self._cached)),
            (self._tables_snapshot(), dict(self._seqs), lengths, list(self._roots)),
            (self._next_ident, self.hit_blocks, self.queried_blocks),
        )

    def _restore(self, snapshot: object) -> None:
        """Put back the state that ``snapshot`` (this manager's :meth:`_snapshot`) saw."""
        prefix_undo.restore(self, snapshot)  # only a failure pays for it: kept apart

    def _copy_seq(self, parent: int, child: int) -> None:
        tokens, _, key = self._seqs[parent]
        self._seqs[child] = (list(tokens), self._tables[child], key)

    def _forget(self, seq: int) -> None:
        del self._seqs[seq]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, "
            f"block_size={self.block_size}, free={len(self._free)}, "
            f"evictable={len(self._evictable)}, cached={len(self._cached)}, "
            f"sequences={len(self._tables)})"
        )
