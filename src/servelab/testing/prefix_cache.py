"""Prefix caching's invariants as code, and a state machine that checks any implementation.

Besides the block manager's rules (:func:`servelab.testing.block_manager.check_invariants`),
a prefix-caching manager keeps three more, read through ``block_hash``, ``cached``,
``evictable`` and ``free_list``:

* **cache-map**: every map entry ``hash -> block`` points at a block that carries that hash
  and is in use or evictable (an evicted block is gone from the map);
* **evictable**: an evictable block is free, hashed and in the map; plain free blocks carry
  no hash; every evictable block comes after every plain one in ``free_list``;
* **stale-hash**: a block that is not full (the tail of a sequence) carries no hash.

The state machine adds what only a model can see: each sequence must read back its own
token ids from its blocks (a shadow memory stands in for the KV; the slots a hit covers are
*not* written again, so a wrong hit shows as wrong data), eviction happens only when no
plain free block is left and takes the least recently freed block first, and calls the model
says must fail raise and change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from servelab.testing.block_manager import (
    BlockManagerLike,
    check_invariants,
    error_matches,
    expect_error,
    snapshot,
)
from servelab.testing.core import InvariantViolation, RecordingMachine

__all__ = [
    "PREFIX_INVARIANTS",
    "PrefixManagerLike",
    "check_prefix_invariants",
    "prefix_cache_machine",
    "prefix_snapshot",
]

PREFIX_INVARIANTS: dict[str, str] = {
    "free-list": "a block is freed once: on the free list at most once, with refcount 0",
    "refcount-matches-tables": "a used block is held by exactly refcount table entries",
    "table-length": "a table holds ceil(len / block_size) blocks",
    "cache-map": "every map entry points at a block that still carries that hash",
    "evictable": "evictable blocks are free, hashed and mapped; plain free blocks are not",
    "stale-hash": "a block that is not full carries no hash",
    "wrong-data": "every sequence reads back exactly its own tokens",
    "hit-count": "a hit covers whole blocks and leaves the last prompt token to compute",
    "lru-eviction": "cached blocks are evicted only when no plain block is free, oldest first",
    "expected-error": "bad calls raise the documented error",
    "exception-safety": "after a raised error the state is exactly as before",
}


class PrefixManagerLike(BlockManagerLike, Protocol):
    """The block manager's inspection surface plus what prefix caching adds."""

    def block_hash(self, block: int) -> int | None: ...

    def cached(self) -> dict[int, int]: ...

    def evictable(self) -> list[int]: ...


def check_prefix_invariants(bm: PrefixManagerLike) -> None:
    """Raise :class:`InvariantViolation` if ``bm`` breaks a prefix-caching rule."""
    check_invariants(bm)
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
                    f"{bm.block_hash(tail)}: it kept the hash of what it held before reuse",
                )


def prefix_snapshot(bm: PrefixManagerLike) -> tuple[Any, ...]:
    """Everything observable, for comparing before and after a failed call."""
    return (
        snapshot(bm),
        tuple(bm.evictable()),
        tuple(sorted(bm.cached().items())),
        tuple(bm.block_hash(b) for b in range(bm.num_blocks)),
    )


# Prompts are drawn from a tiny alphabet, so they share prefixes (and whole blocks) often.
PROMPTS = st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=9)
STEMS = [[0, 1, 2, 0, 1, 2, 0, 1], [1, 1, 1, 1, 1, 1], [0, 1, 2, 2, 1, 0]]


def prefix_cache_machine(
    factory: Callable[[int, int], Any],
    *,
    name: str = "PrefixCachingBlockManager",
    fork: bool = True,
    errors: bool = True,
    max_blocks: int = 10,
) -> type[RecordingMachine]:
    """A state machine class checking ``factory(num_blocks, block_size)``."""

    class PrefixCacheMachine(RecordingMachine):
        def __init__(self) -> None:
            super().__init__()
            self.bm: Any = None
            self.size = 1
            self.memory: dict[tuple[int, int], int] = {}
            self.tokens: dict[int, list[int]] = {}

        # ------------------------------------------------------------- helpers
        def _live(self) -> list[int]:
            return sorted(self.tokens)

        def _free_ids(self) -> list[int]:
            return [s for s in range(6) if s not in self.tokens]

        def _used(self) -> int:
            return len({b for s in self.tokens for b in self.bm.block_table(s)})

        def _lru_check(
            self,
            code: str,
            before_free: list[int],
            before_ev: list[int],
            taken: list[int],
            hits: Sequence[int] = (),
        ) -> None:
            plain = len(before_free) - len(before_ev)
            before_ev = [b for b in before_ev if b not in hits]
            ev_order = [b for b in before_ev if b in taken]
            evicted = len(ev_order)
            if evicted > max(0, len(taken) - plain):
                raise InvariantViolation(
                    "lru-eviction",
                    f"`{code}` reclaimed cached block(s) {ev_order} while {plain} plain free "
                    "block(s) were left",
                )
            if evicted and ev_order != before_ev[:evicted]:
                raise InvariantViolation(
                    "lru-eviction",
                    f"`{code}` evicted {ev_order}; the least recently freed were "
                    f"{before_ev[:evicted]} (evictable order before: {before_ev})",
                )

        def _expect_error(self, code: str, fn: Callable[[], object], kind: str, why: str) -> None:
            expect_error(self, code, fn, kind, why, lambda: prefix_snapshot(self.bm))

        # --------------------------------------------------------------- rules
        @initialize(
            num_blocks=st.integers(min_value=1, max_value=max_blocks),
            block_size=st.integers(min_value=1, max_value=3),
        )
        def create(self, num_blocks: int, block_size: int) -> None:
            self.size = block_size
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
            prompt = (stem[:cut] + tail) or [0]
            if not free_ids:
                return
            seq = data.draw(st.sampled_from(free_ids), label="seq")
            code = f"bm.allocate({seq}, {prompt})"
            need = -(-len(prompt) // self.size)
            before_free, before_ev = self.bm.free_list(), self.bm.evictable()
            before = prefix_snapshot(self.bm)
            try:
                cached = self.do(code, lambda: self.bm.allocate(seq, prompt))
            except Exception as exc:
                if not error_matches(exc, "OutOfBlocks"):
                    raise
                if need <= len(before_free):
                    raise InvariantViolation(
                        "lru-eviction",
                        f"`{code}` raised OutOfBlocks with {len(before_free)} blocks free "
                        f"(plain or evictable) for {need} needed",
                    ) from exc
                if prefix_snapshot(self.bm) != before:
                    raise InvariantViolation(
                        "exception-safety", f"`{code}` raised OutOfBlocks but changed state"
                    ) from exc
                return
            if (
                not isinstance(cached, int)
                or cached % self.size
                or cached < 0
                or cached > len(prompt) - 1
            ):
                raise InvariantViolation(
                    "hit-count",
                    f"`{code}` returned {cached!r}; expected a multiple of {self.size} "
                    f"below {len(prompt)} (the last prompt token is always computed)",
                )
            self.tokens[seq] = list(prompt)
            table = self.bm.block_table(seq)
            if len(table) != need:
                raise InvariantViolation(
                    "table-length",
                    f"after `{code}` the table holds {len(table)} blocks, expected {need}",
                )
            self._lru_check(
                code,
                before_free,
                before_ev,
                table[cached // self.size :],
                table[: cached // self.size],
            )
            for pos in range(cached, len(prompt)):  # the engine computes only uncached KV
                self.memory[(table[pos // self.size], pos % self.size)] = prompt[pos]

        @precondition(lambda self: bool(self.tokens))
        @rule(data=st.data(), token=st.integers(0, 2))
        def append_slot(self, data: st.DataObject, token: int) -> None:
            seq = data.draw(st.sampled_from(self._live()), label="seq")
            code = f"bm.append_slot({seq}, {token})"
            before_free, before_ev = self.bm.free_list(), self.bm.evictable()
            table = self.bm.block_table(seq)
            needs_block = len(self.tokens[seq]) % self.size == 0 or self.bm.refcount(table[-1]) > 1
            if needs_block and not before_free:
                if errors:
                    self._expect_error(
                        code,
                        lambda: self.bm.append_slot(seq, token),
                        "OutOfBlocks",
                        "a block is needed and none is free",
                    )
                return
            slot = self.do(code, lambda: self.bm.append_slot(seq, token))
            block, offset, cow_src = slot
            if offset != len(self.tokens[seq]) % self.size:
                raise InvariantViolation(
                    "table-length",
                    f"`{code}` returned offset {offset}; expected "
                    f"{len(self.tokens[seq]) % self.size}",
                )
            if cow_src is not None:
                for j in range(offset):
                    if (cow_src, j) in self.memory:
                        self.memory[(block, j)] = self.memory[(cow_src, j)]
            self.memory[(block, offset)] = token
            self.tokens[seq].append(token)
            if needs_block:
                self._lru_check(code, before_free, before_ev, [block])

        @precondition(lambda self: fork and bool(self.tokens))
        @rule(data=st.data())
        def fork_seq(self, data: st.DataObject) -> None:
            free_ids = self._free_ids()
            if not free_ids:
                return
            parent = data.draw(st.sampled_from(self._live()), label="parent")
            child = data.draw(st.sampled_from(free_ids), label="child")
            self.do(f"bm.fork({parent}, {child})", lambda: self.bm.fork(parent, child))
            self.tokens[child] = list(self.tokens[parent])

        @precondition(lambda self: bool(self.tokens))
        @rule(data=st.data())
        def free_seq(self, data: st.DataObject) -> None:
            seq = data.draw(st.sampled_from(self._live()), label="seq")
            self.do(f"bm.free_seq({seq})", lambda: self.bm.free_seq(seq))
            del self.tokens[seq]

        @precondition(lambda self: errors)
        @rule(op=st.sampled_from(["free-twice", "unknown-append", "allocate-live"]))
        def bad_call(self, op: str) -> None:
            dead = self._free_ids() or [99]
            if op == "free-twice":
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
            elif self.tokens:
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
            check_prefix_invariants(self.bm)
            if self.bm.num_free != self.bm.num_blocks - self._used():
                raise InvariantViolation(
                    "free-list",
                    f"num_free is {self.bm.num_free} but {self._used()} of "
                    f"{self.bm.num_blocks} blocks are in tables",
                )
            for seq, tokens in self.tokens.items():
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
