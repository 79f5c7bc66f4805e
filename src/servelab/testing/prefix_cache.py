"""Prefix caching's invariants as code, and a state machine that checks any implementation.

Besides the block manager's rules
(:func:`servelab.testing.block_manager.check_block_manager_invariants`), a prefix-caching
manager keeps three more, read through ``block_hash``, ``cached``, ``evictable`` and
``free_list``:

* **cache-map**: every map entry ``hash -> block`` points at a block that carries that hash
  and is in use or evictable (an evicted block is gone from the map);
* **evictable**: an evictable block is free, hashed and in the map; plain free blocks carry
  no hash; every evictable block comes after every plain one in ``free_list``;
* **stale-hash**: a block that is not full (the tail of a sequence) carries no hash.

The state machine compares the implementation with :class:`PrefixCacheModel`, an executable model
of the rules on abstract block ids: which whole prefixes are cached, how many tokens each
prompt hits, and the order in which freed cached blocks are reclaimed (least recently freed
first, a sequence's tail first, a hit taking a block off the list). It also checks what only
the data can show: each sequence must read back its own token ids from its blocks (a shadow
memory stands in for the KV; the slots a hit covers are *not* written again, so a wrong hit
shows as wrong data), and calls the model says must fail raise and change nothing. The model
names no hash function: any hash that chains over the whole prefix behaves the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from servelab.testing.block_manager import (
    BlockManagerLike,
    check_block_manager_invariants,
    error_matches,
    expect_error,
    snapshot,
)
from servelab.testing.core import InvariantViolation, RecordingMachine

__all__ = [
    "INVARIANTS",
    "PrefixCacheModel",
    "PrefixManagerLike",
    "check_prefix_cache_invariants",
    "prefix_cache_machine",
    "prefix_snapshot",
]

INVARIANTS: dict[str, str] = {
    "free-list": "a block is freed once: on the free list at most once, with refcount 0",
    "refcount-matches-tables": "a used block is held by exactly refcount table entries",
    "table-length": "a table holds ceil(len / block_size) blocks",
    "cache-map": "every map entry points at a block that still carries that hash",
    "evictable": "evictable blocks are free, hashed and mapped; plain free blocks are not",
    "stale-hash": "a block that is not full carries no hash",
    "wrong-data": "every sequence reads back exactly its own tokens",
    "hit-count": "a hit covers the cached whole-prefix blocks, up to the first miss",
    "hit-cap": "a hit leaves the last prompt token to compute",
    "lru-eviction": "cached blocks are evicted only when no plain block is free, oldest first",
    "expected-error": "bad calls raise the documented error",
    "exception-safety": "after a raised error the state is exactly as before",
}


class PrefixManagerLike(BlockManagerLike, Protocol):
    """The block manager's inspection surface plus what prefix caching adds."""

    def block_hash(self, block: int) -> int | None: ...

    def cached(self) -> dict[int, int]: ...

    def evictable(self) -> list[int]: ...


def check_prefix_cache_invariants(bm: PrefixManagerLike) -> None:
    """Raise :class:`InvariantViolation` if ``bm`` breaks a prefix-caching rule."""
    check_block_manager_invariants(bm)
    free = bm.free_list()
    evictable = bm.evictable()
    ev_set = set(evictable)
    if len(ev_set) != len(evictable):
        raise InvariantViolation("free-list", f"a block is evictable twice: {evictable}")
    if free[len(free) - len(evictable) :] != evictable:
        raise InvariantViolation(
            "evictable",
            f"free_list() {free} must list the plain free blocks, then evictable() {evictable}",
        )
    cached = bm.cached()
    for h, b in cached.items():
        if bm.block_hash(b) != h:
            raise InvariantViolation(
                "cache-map",
                f"the cache map sends a hash to block {b}, which no longer carries it "
                f"(block_hash is {bm.block_hash(b)!r}): the entry outlived an eviction",
            )
        if bm.refcount(b) == 0 and b not in ev_set:
            raise InvariantViolation(
                "cache-map", f"the cache map holds block {b}, which is plain free (evicted)"
            )
    for b in evictable:
        key = bm.block_hash(b)
        if key is None or cached.get(key) != b:
            raise InvariantViolation(
                "evictable", f"evictable block {b} is not in the cache map under its hash"
            )
    for b in free[: len(free) - len(evictable)]:
        if bm.block_hash(b) is not None:
            raise InvariantViolation(
                "stale-hash", f"plain free block {b} still carries hash {bm.block_hash(b)}"
            )
    size = bm.block_size
    for seq in bm.sequences():
        length = bm.seq_len(seq)
        if length % size:
            tail = bm.block_table(seq)[-1]
            if bm.block_hash(tail) is not None:
                raise InvariantViolation(
                    "stale-hash",
                    f"block {tail}, the partial tail of sequence {seq}, carries hash "
                    f"{bm.block_hash(tail)}; a block is hashed only once it is full",
                )


def prefix_snapshot(bm: PrefixManagerLike) -> tuple[Any, ...]:
    """Everything observable, for comparing before and after a failed call."""
    return (
        snapshot(bm),
        tuple(bm.evictable()),
        tuple(sorted(bm.cached().items())),
        tuple(bm.block_hash(b) for b in range(bm.num_blocks)),
    )


@dataclass
class PrefixCacheModel:
    """The rules of prefix caching on abstract block ids (no physical placement, no hashes).

    A cached block is named by the whole prefix it completes (``tokens[: (i + 1) * size]``),
    which is what a hash chained over the previous block's hash stands for. ``keep_freed``
    False is step 1 of the notebook, where a freed block forgets its hash at once.
    """

    num_blocks: int
    block_size: int
    keep_freed: bool = True
    plain_free: int = 0
    ref: dict[int, int] = field(default_factory=dict)
    key: dict[int, tuple[int, ...]] = field(default_factory=dict)  # hashed block -> prefix
    cached: dict[tuple[int, ...], int] = field(default_factory=dict)  # prefix -> block
    evictable: list[int] = field(default_factory=list)  # least recently freed first
    tables: dict[int, list[int]] = field(default_factory=dict)
    tokens: dict[int, list[int]] = field(default_factory=dict)
    next_id: int = 0
    reclaimed: list[int] = field(default_factory=list)  # evictable blocks reused, last call

    def __post_init__(self) -> None:
        self.plain_free = self.num_blocks

    @property
    def num_free(self) -> int:
        return self.plain_free + len(self.evictable)

    def full_blocks(self, tokens: list[int]) -> int:
        return len(tokens) // self.block_size

    def prefix(self, tokens: list[int], i: int) -> tuple[int, ...]:
        return tuple(tokens[: (i + 1) * self.block_size])

    def lookup(self, tokens: list[int], cap: bool = True) -> list[int]:
        """Cached blocks of ``tokens``' prefix, stopping at the first miss; with ``cap``, at
        most ``(len - 1) // block_size`` so the last prompt token is computed."""
        limit = (len(tokens) - 1) // self.block_size if cap else self.full_blocks(tokens)
        hits = []
        for i in range(limit):
            block = self.cached.get(self.prefix(tokens, i))
            if block is None:
                break
            hits.append(block)
        return hits

    def need(self, tokens: list[int]) -> int:
        return -(-len(tokens) // self.block_size) - len(self.lookup(tokens))

    def fits(self, tokens: list[int]) -> bool:
        claimed = sum(1 for b in self.lookup(tokens) if b in self.evictable)
        return self.need(tokens) <= self.num_free - claimed

    def _take(self) -> int:
        if self.plain_free:
            self.plain_free -= 1
        else:
            victim = self.evictable.pop(0)
            self._forget(victim)
            self.reclaimed.append(victim)
        self.next_id += 1
        self.ref[self.next_id] = 1
        return self.next_id

    def _forget(self, block: int) -> None:
        del self.cached[self.key.pop(block)]

    def _register(self, block: int, prefix: tuple[int, ...]) -> None:
        if prefix not in self.cached:
            self.cached[prefix] = block
            self.key[block] = prefix

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block]:
            return
        del self.ref[block]
        if block in self.key and self.keep_freed:
            self.evictable.append(block)
        else:
            if block in self.key:
                self._forget(block)
            self.plain_free += 1

    def allocate(self, seq: int, tokens: list[int]) -> int:
        """The cached tokens; the caller has checked :meth:`fits`."""
        self.reclaimed = []
        hits = self.lookup(tokens)
        for b in hits:
            if b in self.evictable:
                self.evictable.remove(b)
            self.ref[b] = self.ref.get(b, 0) + 1
        table = list(hits)
        for i in range(len(hits), -(-len(tokens) // self.block_size)):
            block = self._take()
            table.append(block)
            if i < self.full_blocks(tokens):
                self._register(block, self.prefix(tokens, i))
        self.tables[seq] = table
        self.tokens[seq] = list(tokens)
        return len(hits) * self.block_size

    def append_needs_block(self, seq: int) -> bool:
        table, n = self.tables[seq], len(self.tokens[seq])
        return n % self.block_size == 0 or self.ref[table[-1]] > 1

    def append(self, seq: int, token: int) -> None:
        self.reclaimed = []
        table, tokens = self.tables[seq], self.tokens[seq]
        n = len(tokens)
        if n % self.block_size == 0:
            table.append(self._take())
        elif self.ref[table[-1]] > 1:
            old = table[-1]
            table[-1] = self._take()
            self._release(old)
        tokens.append(token)
        if (n + 1) % self.block_size == 0:
            self._register(table[-1], self.prefix(tokens, n // self.block_size))

    def fork(self, parent: int, child: int) -> None:
        for b in self.tables[parent]:
            self.ref[b] += 1
        self.tables[child] = list(self.tables[parent])
        self.tokens[child] = list(self.tokens[parent])

    def free(self, seq: int) -> None:
        table = self.tables.pop(seq)
        del self.tokens[seq]
        for b in reversed(table):  # the tail first: a prompt's beginning stays cached longest
            self._release(b)


# Prompts are drawn from a tiny alphabet, so they share prefixes (and whole blocks) often.
PROMPTS = st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=9)
STEMS = [[0, 1, 2, 0, 1, 2, 0, 1], [1, 1, 1, 1, 1, 1], [0, 1, 2, 2, 1, 0]]


def prefix_cache_machine(
    factory: Callable[[int, int], Any],
    *,
    name: str = "PrefixCachingBlockManager",
    fork: bool = True,
    errors: bool = True,
    frees: bool = True,
    max_blocks: int = 10,
) -> type[RecordingMachine]:
    """A state machine class checking ``factory(num_blocks, block_size)`` against the model.

    ``frees`` False leaves ``free_seq`` out (step 1: what a freed cached block becomes is the
    next step's lesson, so nothing is ever freed and no block reclaimed).
    """

    class PrefixCacheMachine(RecordingMachine):
        def __init__(self) -> None:
            super().__init__()
            self.bm: Any = None
            self.model = PrefixCacheModel(1, 1)
            self.size = 1
            self.memory: dict[tuple[int, int], int] = {}
            self.a2p: dict[int, int] = {}

        # ------------------------------------------------------------- helpers
        def _live(self) -> list[int]:
            return sorted(self.model.tables)

        def _free_ids(self) -> list[int]:
            return [s for s in range(6) if s not in self.model.tables]

        def _expect_error(self, code: str, fn: Callable[[], object], kind: str, why: str) -> None:
            expect_error(self, code, fn, kind, why, lambda: prefix_snapshot(self.bm))

        def _alive(self) -> set[int]:
            return set(self.model.ref) | set(self.model.evictable)

        def _sync(self, code: str) -> None:
            """Map the model's blocks onto the implementation's, and compare what is cached."""
            alive = self._alive()
            self.a2p = {a: p for a, p in self.a2p.items() if a in alive}
            p2a = {p: a for a, p in self.a2p.items()}
            m = self.model
            for seq in self._live():
                table = self.bm.block_table(seq)
                want = m.tables[seq]
                if len(table) != len(want):
                    raise InvariantViolation(
                        "table-length",
                        f"after `{code}` sequence {seq} holds {len(table)} blocks {table}; its "
                        f"{len(m.tokens[seq])} tokens need {len(want)}",
                    )
                for i, (a, p) in enumerate(zip(want, table, strict=True)):
                    if a in self.a2p:
                        if self.a2p[a] != p:
                            raise InvariantViolation(
                                "wrong-data",
                                f"after `{code}` block {i} of sequence {seq} is block {p}; it "
                                f"should be block {self.a2p[a]}, which holds the same tokens",
                            )
                        continue
                    if p in p2a:
                        old = p2a[p]
                        if old in m.evictable:
                            raise InvariantViolation(
                                "lru-eviction",
                                f"`{code}` reclaimed cached block {p}; the model reclaims "
                                + (
                                    f"block(s) {[self.a2p.get(b) for b in m.reclaimed]} first "
                                    "(least recently freed first)"
                                    if m.reclaimed
                                    else "nothing while plain free blocks are left"
                                ),
                            )
                        raise InvariantViolation(
                            "free-list",
                            f"after `{code}` block {p} serves two different blocks: it was "
                            "handed out while still in use",
                        )
                    self.a2p[a] = p
                    p2a[p] = a
            if self.bm.num_free != m.num_free:
                raise InvariantViolation(
                    "free-list",
                    f"after `{code}` num_free is {self.bm.num_free}; the model has "
                    f"{m.plain_free} plain free and {len(m.evictable)} evictable blocks",
                )
            got = [p2a.get(p) for p in self.bm.evictable()]
            if got != m.evictable:
                want_p = [self.a2p.get(a) for a in m.evictable]
                raise InvariantViolation(
                    "lru-eviction"
                    if sorted(map(str, got)) == sorted(map(str, m.evictable))
                    else "evictable",
                    f"after `{code}` evictable() is {self.bm.evictable()}; expected {want_p} "
                    "(least recently freed first: a sequence frees its tail first, and a hit "
                    "takes a block off the list until it is freed again)",
                )
            cached = {p2a.get(p) for p in self.bm.cached().values()}
            if cached != set(m.key):
                extra = sorted(p for p in self.bm.cached().values() if p2a.get(p) not in m.key)
                missing = sorted(str(self.a2p[a]) for a in set(m.key) - cached)
                raise InvariantViolation(
                    "cache-map",
                    f"after `{code}` the cache map holds blocks it should not ({extra}) or lacks "
                    f"blocks it should hold ({missing}): a full block is cached once, under its "
                    "whole prefix, until it is reclaimed",
                )

        # --------------------------------------------------------------- rules
        @initialize(
            num_blocks=st.integers(min_value=1, max_value=max_blocks),
            block_size=st.integers(min_value=1, max_value=3),
        )
        def create(self, num_blocks: int, block_size: int) -> None:
            self.size = block_size
            self.model = PrefixCacheModel(num_blocks, block_size, keep_freed=frees)
            self.bm = self.do(
                f"bm = {name}({num_blocks}, {block_size})",
                lambda: factory(num_blocks, block_size),
            )

        @rule(
            data=st.data(),
            stem=st.sampled_from(STEMS),
            cut=st.integers(0, 8),
            tail=st.lists(st.integers(0, 2), max_size=4),
        )
        def allocate(self, data: st.DataObject, stem: list[int], cut: int, tail: list[int]) -> None:
            free_ids = self._free_ids()
            if not free_ids:
                return
            self._allocate(
                data.draw(st.sampled_from(free_ids), label="seq"), (stem[:cut] + tail) or [0]
            )

        def _allocate(self, seq: int, prompt: list[int]) -> None:
            m = self.model
            code = f"bm.allocate({seq}, {prompt})"
            if not m.fits(prompt):
                if errors:
                    self._expect_error(
                        code,
                        lambda: self.bm.allocate(seq, list(prompt)),
                        "OutOfBlocks",
                        f"{m.need(prompt)} new blocks needed, {m.num_free} free or evictable",
                    )
                return
            try:
                cached = self.do(code, lambda: self.bm.allocate(seq, list(prompt)))
            except Exception as exc:
                if not error_matches(exc, "OutOfBlocks"):
                    raise
                raise InvariantViolation(
                    "lru-eviction",
                    f"`{code}` raised OutOfBlocks, but {m.need(prompt)} new blocks are needed "
                    f"and {m.num_free} are free or evictable",
                ) from exc
            uncapped = len(m.lookup(prompt, cap=False)) * self.size
            want = m.allocate(seq, prompt)
            if cached != want:
                capped = cached == uncapped and cached > want
                raise InvariantViolation(
                    "hit-cap" if capped else "hit-count",
                    f"`{code}` returned {cached!r} cached tokens; expected {want}: "
                    + (
                        "the last prompt token is always computed"
                        if capped
                        else "the leading blocks whose whole prefix is cached, up to the first miss"
                    ),
                )
            self._sync(code)
            table = self.bm.block_table(seq)
            for pos in range(cached, len(prompt)):  # the engine computes only uncached KV
                self.memory[(table[pos // self.size], pos % self.size)] = prompt[pos]

        @precondition(lambda self: bool(self.model.tables))
        @rule(data=st.data(), tail=st.lists(st.integers(0, 2), max_size=3))
        def share_prefix(self, data: st.DataObject, tail: list[int]) -> None:
            # a new request that starts with a live sequence's tokens: hits, whatever the seed
            free_ids = self._free_ids()
            if not free_ids:
                return
            seq = data.draw(st.sampled_from(self._live()), label="seq")
            self._allocate(free_ids[0], [*self.model.tokens[seq], *tail])

        @precondition(lambda self: bool(self.model.tables))
        @rule(data=st.data(), token=st.integers(0, 2))
        def append_slot(self, data: st.DataObject, token: int) -> None:
            self._append(data.draw(st.sampled_from(self._live()), label="seq"), token)

        def _append(self, seq: int, token: int) -> None:
            m = self.model
            code = f"bm.append_slot({seq}, {token})"
            if m.append_needs_block(seq) and not m.num_free:
                if errors:
                    self._expect_error(
                        code,
                        lambda: self.bm.append_slot(seq, token),
                        "OutOfBlocks",
                        "a block is needed and none is free",
                    )
                return
            offset_want = len(m.tokens[seq]) % self.size
            slot = self.do(code, lambda: self.bm.append_slot(seq, token))
            block, offset, cow_src = slot
            if offset != offset_want:
                raise InvariantViolation(
                    "table-length", f"`{code}` returned offset {offset}; expected {offset_want}"
                )
            m.append(seq, token)
            if cow_src is not None:
                for j in range(offset):
                    if (cow_src, j) in self.memory:
                        self.memory[(block, j)] = self.memory[(cow_src, j)]
            self.memory[(block, offset)] = token
            self._sync(code)

        @precondition(lambda self: bool(self.model.tables))
        @rule(data=st.data())
        def private_copy(self, data: st.DataObject) -> None:
            # A prompt of exactly one cached block is computed, not hit (its last token), so it
            # gets a private copy; filled up by decoding, its next block is cached under a
            # prefix whose first block the map knows elsewhere. Reclaiming that first block
            # then leaves a later block cached behind a miss: where a lookup must stop.
            seq = data.draw(st.sampled_from(self._live()), label="seq")
            tokens = self.model.tokens[seq]
            free_ids = self._free_ids()
            if len(tokens) < self.size or not free_ids:
                return
            twin = free_ids[0]
            size = self.size
            extra = data.draw(st.lists(st.integers(3, 4), min_size=size, max_size=size))
            self._allocate(twin, tokens[:size])
            if twin not in self.model.tables:
                return
            for token in extra:
                self._append(twin, token)
            m = self.model
            if not frees or len(m.tokens[twin]) < 2 * self.size:
                return
            # free the original, reclaim every free block with a filler, free it: the first
            # block is gone, the twin's second block is not; then look the twin's prefix up
            self._free(seq)
            ids = self._free_ids()
            if len(ids) < 2 or not m.num_free:
                return
            filler = ids[0]
            self._allocate(filler, [5] * (m.num_free * self.size))
            if filler in m.tables:
                self._free(filler)
            self._allocate(self._free_ids()[0], [*m.tokens[twin], 0])

        @precondition(lambda self: frees and errors and bool(self.model.tables))
        @rule(data=st.data())
        def rehit_in_a_full_pool(self, data: st.DataObject) -> None:
            # A room check must not count as free the evictable blocks its own hits take.
            # That shows only when the pool is short by exactly those blocks, which random
            # programs reach on some seeds only: free a sequence (its cached blocks become
            # evictable), then ask for its cached prefix plus one new block more than the
            # blocks left once the hits are taken off the free count.
            seq = data.draw(st.sampled_from(self._live()), label="seq")
            m, size = self.model, self.size
            stem = m.tokens[seq][: m.full_blocks(m.tokens[seq]) * size]
            if not stem:
                return
            self._free(seq)
            hits = m.lookup([*stem, 9])
            claimed = sum(1 for b in hits if b in m.evictable)
            room = m.num_free - claimed
            self._allocate(self._free_ids()[0], [*stem, *[9] * ((room + 1) * size)])

        @precondition(lambda self: fork and bool(self.model.tables))
        @rule(data=st.data())
        def fork_seq(self, data: st.DataObject) -> None:
            free_ids = self._free_ids()
            if not free_ids:
                return
            parent = data.draw(st.sampled_from(self._live()), label="parent")
            child = data.draw(st.sampled_from(free_ids), label="child")
            code = f"bm.fork({parent}, {child})"
            self.do(code, lambda: self.bm.fork(parent, child))
            self.model.fork(parent, child)
            self._sync(code)

        @precondition(lambda self: frees and bool(self.model.tables))
        @rule(data=st.data())
        def free_seq(self, data: st.DataObject) -> None:
            self._free(data.draw(st.sampled_from(self._live()), label="seq"))

        def _free(self, seq: int) -> None:
            code = f"bm.free_seq({seq})"
            self.do(code, lambda: self.bm.free_seq(seq))
            self.model.free(seq)
            self._sync(code)

        @precondition(lambda self: errors)
        @rule(op=st.sampled_from(["free-twice", "unknown-append", "allocate-live"]))
        def bad_call(self, op: str) -> None:
            dead = self._free_ids() or [99]
            if op == "free-twice" and frees:
                self._expect_error(
                    f"bm.free_seq({dead[0]})",
                    lambda: self.bm.free_seq(dead[0]),
                    "UnknownSequence",
                    f"sequence {dead[0]} is not live",
                )
            elif op == "unknown-append":
                self._expect_error(
                    f"bm.append_slot({dead[0]}, 0)",
                    lambda: self.bm.append_slot(dead[0], 0),
                    "UnknownSequence",
                    f"sequence {dead[0]} is not live",
                )
            elif self.model.tables:
                seq = self._live()[0]
                self._expect_error(
                    f"bm.allocate({seq}, [0])",
                    lambda: self.bm.allocate(seq, [0]),
                    "SequenceExists",
                    f"sequence {seq} is live",
                )

        # ----------------------------------------------------------- invariants
        @invariant()
        def rules_hold(self) -> None:
            if self.bm is None:
                return
            check_prefix_cache_invariants(self.bm)
            for seq, tokens in self.model.tokens.items():
                table = self.bm.block_table(seq)
                got = [
                    self.memory.get((table[p // self.size], p % self.size))
                    for p in range(len(tokens))
                ]
                if got != tokens:
                    raise InvariantViolation(
                        "wrong-data",
                        f"sequence {seq} holds tokens {tokens} but its blocks {table} contain "
                        f"{got}: a cache hit served another prefix's data",
                    )

    PrefixCacheMachine.__name__ = f"{name}Machine"
    PrefixCacheMachine.__qualname__ = PrefixCacheMachine.__name__
    return PrefixCacheMachine
