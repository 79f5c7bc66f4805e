"""The block manager's invariants as code, and a state machine that checks any implementation.

:func:`check_block_manager_invariants` reads only the inspection API (``block_table``, ``seq_len``,
``refcount``, ``free_list``, ``sequences``, ``num_free``) and checks the rules that hold after
every operation, whatever the implementation:

* every block is either free (on the free list once, refcount 0) or referenced exactly
  ``refcount`` times across all block tables;
* a table holds exactly ``ceil(len / block_size)`` blocks.

:func:`block_manager_machine` builds a Hypothesis state machine that drives an
implementation with allocate / append_slot / fork / free_seq (and, optionally, calls that
must fail) and compares it with :class:`BlockManagerModel`, an executable model of the rules that
names blocks abstractly, so it fixes *which* logical blocks must share a physical block but
not which physical ids an implementation hands out. It also keeps a shadow copy of the
cache contents: every append writes a fresh token value into the returned slot (after
doing the copy it was told to do), and every live sequence must still read back exactly
what it wrote — so a write that lands in a block another sequence can read is caught.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from servelab.testing.block_model import BlockManagerModel
from servelab.testing.core import InvariantViolation, RecordingMachine
from servelab.testing.expected_error import error_matches, expect_error, wrong_class
from servelab.testing.free_order import check_free_order, check_freed_tail_first
from servelab.testing.pasteable import SUPPRESS_IMPORT

__all__ = [
    "INVARIANTS",
    "SUPPRESS_IMPORT",
    "BlockManagerLike",
    "BlockManagerModel",
    "block_manager_machine",
    "check_block_manager_invariants",
    "check_free_order",
    "check_freed_tail_first",
    "error_matches",
    "expect_error",
    "snapshot",
    "wrong_class",
]

# Stable ids of the rules the machine checks, in the order a learner meets them.
INVARIANTS: dict[str, str] = {
    "free-list": "a free block is on the free list exactly once, with refcount 0",
    "refcount-matches-tables": "a used block is held by exactly refcount table entries",
    "table-length": "a table holds ceil(len / block_size) blocks",
    "length": "seq_len counts every token allocated or appended",
    "table-distinct": "a table lists each block once",
    "free-count": "num_free equals the blocks the model says are unused",
    "free-order-take": "a block is taken from the left end of the free list",
    "free-order-return": "a freed block joins the right end of the free list",
    "free-tail-first": "free_seq releases a table last block first",
    "boundary-allocation": "a block is allocated only when a length crosses a boundary",
    "fork-shares": "a fork shares every block of its parent",
    "cow-full-block": "full blocks are never copied",
    "cow-sole-owner": "a block held by one sequence is written in place",
    "cow-missing": "a shared partial block is copied before the write",
    "write-isolation": "no write lands in a block another live sequence reads",
    "expected-error": "bad calls raise the documented error",
    "all-or-nothing": "allocate takes every block it needs or none",
    "cow-release-before-allocate": "append_slot allocates the copy before releasing",
    "exception-safety": "after a raised error the state is exactly as before",
}


class BlockManagerLike(Protocol):
    """The inspection surface every checked implementation exposes."""

    block_size: int
    num_blocks: int

    @property
    def num_free(self) -> int: ...

    def block_table(self, seq: int) -> list[int]: ...

    def seq_len(self, seq: int) -> int: ...

    def refcount(self, block: int) -> int: ...

    def free_list(self) -> list[int]: ...

    def sequences(self) -> list[int]: ...


def check_block_manager_invariants(bm: BlockManagerLike) -> None:
    """Raise :class:`InvariantViolation` if ``bm`` breaks a rule that always holds."""
    n, size = bm.num_blocks, bm.block_size
    free = bm.free_list()
    on_free: set[int] = set()
    for b in free:
        if b in on_free:
            raise InvariantViolation("free-list", f"block {b} is on the free list twice")
        on_free.add(b)
        if bm.refcount(b) != 0:
            raise InvariantViolation(
                "free-list", f"block {b} is on the free list with refcount {bm.refcount(b)}"
            )
    if bm.num_free != len(free):
        raise InvariantViolation(
            "free-list", f"num_free is {bm.num_free} but the free list holds {len(free)} blocks"
        )
    held = [0] * n
    for seq in bm.sequences():
        table, length = bm.block_table(seq), bm.seq_len(seq)
        want = -(-length // size)
        if len(table) != want:
            raise InvariantViolation(
                "table-length",
                f"sequence {seq} has {length} tokens, so ceil({length}/{size}) = {want} "
                f"blocks, but its table holds {len(table)}: {table}",
            )
        if len(set(table)) != len(table):
            twice = sorted({b for b in table if table.count(b) > 1})
            raise InvariantViolation(
                "table-distinct",
                f"sequence {seq}'s table {table} lists block(s) {twice} more than once: two "
                "of its logical blocks would share one physical block",
            )
        for b in table:
            held[b] += 1
    for b in range(n):
        ref = bm.refcount(b)
        if held[b] != ref:
            raise InvariantViolation(
                "refcount-matches-tables",
                f"block {b} has refcount {ref} but {held[b]} table "
                + ("entry holds it" if held[b] == 1 else "entries hold it"),
            )
        if ref == 0 and b not in on_free:
            raise InvariantViolation(
                "free-list", f"block {b} is held by no table but is not on the free list (leak)"
            )
        if ref > 0 and b in on_free:
            raise InvariantViolation(
                "free-list", f"block {b} is on the free list while a table still holds it"
            )


def snapshot(bm: BlockManagerLike) -> tuple[Any, ...]:
    """Everything observable about ``bm``, for comparing before and after a failed call: a
    length the skeleton's ``lens`` keeps for a sequence with no table comes with no table."""
    seqs = sorted(bm.sequences())
    lens = getattr(bm, "lens", None)
    stray = (
        [(s, None, n) for s, n in lens.items() if s not in seqs] if isinstance(lens, dict) else []
    )
    return (
        (*((s, tuple(bm.block_table(s)), bm.seq_len(s)) for s in seqs), *stray),
        tuple(bm.refcount(b) for b in range(bm.num_blocks)),
        tuple(bm.free_list()),
        bm.num_free,
    )


SEQ_IDS = st.integers(min_value=0, max_value=5)


def block_manager_machine(
    factory: Callable[[int, int], Any],
    *,
    name: str = "BlockManager",
    append: bool = True,
    fork: bool = True,
    errors: bool = True,
    max_blocks: int = 10,
    max_block_size: int = 4,
) -> type[RecordingMachine]:
    """A state machine class checking ``factory(num_blocks, block_size)`` against the model.

    ``append``, ``fork`` and ``errors`` switch rule groups on, so a graded step checks only
    what it has taught. ``name`` is the class name written in the recorded program.
    """

    class BlockManagerMachine(RecordingMachine):
        def __init__(self) -> None:
            super().__init__()
            self.bm: Any = None
            self.model = BlockManagerModel(1, 1)
            self.a2p: dict[int, int] = {}
            self.memory: dict[tuple[int, int], int] = {}
            self.content: dict[int, list[int]] = {}
            self.token = 0

        # ------------------------------------------------------------- helpers
        def _fresh(self) -> int:
            self.token += 1
            return self.token

        def _sync(self, what: str) -> None:
            """Map the model's abstract blocks onto the implementation's physical ones."""
            live = set(self.model.ref)
            self.a2p = {a: p for a, p in self.a2p.items() if a in live}
            p2a = {p: a for a, p in self.a2p.items()}
            for seq in self.model.tables:
                table = self.bm.block_table(seq)
                want = self.model.tables[seq]
                if self.bm.seq_len(seq) != self.model.lens[seq]:
                    raise InvariantViolation(
                        "length",
                        f"after `{what}`, seq_len({seq}) is {self.bm.seq_len(seq)}; it has "
                        f"{self.model.lens[seq]} tokens",
                    )
                if len(table) != len(want):
                    raise InvariantViolation(
                        "table-length",
                        f"after `{what}`, sequence {seq} holds {len(table)} blocks {table}; "
                        f"it has {self.model.lens[seq]} tokens, so it should hold {len(want)}",
                    )
                for i, (a, p) in enumerate(zip(want, table, strict=True)):
                    if a in self.a2p:
                        if self.a2p[a] != p:
                            shared = [s for s, t in self.model.tables.items() if a in t]
                            raise InvariantViolation(
                                "fork-shares",
                                f"after `{what}`, logical block {i} of sequence {seq} is "
                                f"block {p}, but sequences {shared} should all share block "
                                f"{self.a2p[a]} there",
                            )
                    elif p in p2a:
                        raise InvariantViolation(
                            "write-isolation",
                            f"after `{what}`, block {p} serves two different logical blocks "
                            f"(sequence {seq}, logical block {i}, and another table)",
                        )
                    else:
                        self.a2p[a] = p
                        p2a[p] = a

        def _fill(self, seq: int) -> None:
            """Write fresh token values into every slot of a newly allocated sequence."""
            table, size = self.bm.block_table(seq), self.model.block_size
            values = [self._fresh() for _ in range(self.model.lens[seq])]
            for pos, v in enumerate(values):
                self.memory[(table[pos // size], pos % size)] = v
            self.content[seq] = values

        def _expect_error(
            self,
            code: str,
            fn: Callable[[], object],
            kind: str,
            why: str,
            on_change: str = "exception-safety",
        ) -> None:
            expect_error(self, code, fn, kind, why, lambda: snapshot(self.bm), on_change)

        def _call(self, code: str, fn: Callable[[], Any]) -> Any:
            """Run a call the model says must succeed; an OutOfBlocks here means waste."""
            try:
                return self.do(code, fn)
            except Exception as exc:
                if error_matches(exc, "OutOfBlocks"):
                    want, got = self.model.num_free, getattr(self.bm, "num_free", None)
                    why = ""
                    if isinstance(got, int) and got < want:
                        why = (
                            ": an earlier call took a block it did not need, or never gave one back"
                        )
                    elif got == want:
                        why = f"; yours counts {got} free too, yet refused a call that fits"
                    raise InvariantViolation(
                        "free-count",
                        f"`{code}` raised {type(exc).__name__}, but {want} blocks should still "
                        f"be free{why}",
                    ) from exc
                raise

        def _live(self) -> list[int]:
            return sorted(self.model.tables)

        # --------------------------------------------------------------- rules
        # Hypothesis enables a random subset of the rules in each program, so a program starts
        # from a few sequences already allocated: forks and appends have something to work on
        # even when the allocate rule is off. One too long for what is left takes every free
        # block, its last one partly filled: a full pool with a partial tail to share.
        @initialize(
            num_blocks=st.integers(min_value=1, max_value=max_blocks),
            block_size=st.integers(min_value=1, max_value=max_block_size),
            fill=st.lists(st.integers(min_value=0, max_value=12), max_size=3),
        )
        def create(self, num_blocks: int, block_size: int, fill: list[int]) -> None:
            self.model = BlockManagerModel(num_blocks, block_size)
            self.bm = self.do(
                f"bm = {name}({num_blocks}, {block_size})",
                lambda: factory(num_blocks, block_size),
            )
            for seq, n_tokens in enumerate(fill):
                free = self.model.num_free
                if self.model.need(n_tokens) > free:
                    last = max(1, n_tokens % block_size)  # tokens in the last block
                    n_tokens = (free - 1) * block_size + last if free else 0
                self._allocate(seq, n_tokens)

        @precondition(lambda self: len(self.model.tables) < 6)
        @rule(data=st.data())
        def allocate(self, data: st.DataObject) -> None:
            # a length that fits (too long is allocate_too_much): in a small pool, most lengths
            # drawn from a fixed range would not, and the program would stay empty
            room = min(12, self.model.num_free * self.model.block_size)
            n_tokens = data.draw(st.integers(min_value=0, max_value=room), label="n_tokens")
            free_ids = [s for s in range(6) if s not in self.model.tables]
            self._allocate(data.draw(st.sampled_from(free_ids), label="seq"), n_tokens)

        def _allocate(self, seq: int, n_tokens: int) -> None:
            code = f"bm.allocate({seq}, {n_tokens})"
            self._call(code, lambda: self.bm.allocate(seq, n_tokens))
            self.model.allocate(seq, n_tokens)
            self._check_free_count(code, "allocated")
            self._sync(code)
            self._fill(seq)

        @precondition(lambda self: append and bool(self.model.tables))
        @rule(data=st.data())
        def append_slot(self, data: st.DataObject) -> None:
            seq = data.draw(st.sampled_from(self._live()), label="seq")
            if self.model.append_kind(seq) != "inplace" and self.model.num_free == 0:
                return  # the error case is its own rule
            self._append(seq)

        def _append(self, seq: int) -> None:
            """One append the model says succeeds, checked slot by slot."""
            kind = self.model.append_kind(seq)
            code = f"bm.append_slot({seq})"
            old_block = self.a2p[self.model.tables[seq][-1]] if self.model.tables[seq] else None
            in_use = set(self.a2p.values())
            slot = self._call(code, lambda: self.bm.append_slot(seq))
            try:
                block, offset, cow_src = slot
            except (TypeError, ValueError) as exc:
                raise InvariantViolation(
                    "expected-error",
                    f"`{code}` returned {slot!r}; expected a (block, offset, cow_src) tuple",
                ) from exc
            length = self.model.lens[seq]
            self._check_slot(code, kind, block, offset, cow_src, length, old_block, in_use)
            self.model.append(seq)
            self._check_free_count(code, "holds")
            if cow_src is not None:
                for j in range(offset):
                    if (cow_src, j) in self.memory:
                        self.memory[(block, j)] = self.memory[(cow_src, j)]
            value = self._fresh()
            self.memory[(block, offset)] = value
            self.content[seq].append(value)
            self._sync(code)

        def _check_slot(
            self,
            code: str,
            kind: str,
            block: int,
            offset: int,
            cow_src: int | None,
            length: int,
            old_block: int | None,
            in_use: set[int],
        ) -> None:
            want_offset = length % self.model.block_size
            if offset != want_offset:
                raise InvariantViolation(
                    "boundary-allocation",
                    f"`{code}` returned offset {offset}; the sequence has "
                    f"{length} tokens, so the new token goes to offset {want_offset}",
                )
            if kind == "new":
                if cow_src is not None:
                    raise InvariantViolation(
                        "cow-full-block",
                        f"`{code}` starts a new block (the last one is full) but also asks to "
                        f"copy block {cow_src}; a full block is never written, so it stays "
                        "shared",
                    )
                if block in in_use:
                    raise InvariantViolation(
                        "boundary-allocation",
                        f"`{code}` crosses a block boundary and must write into a newly "
                        f"allocated block, but returned block {block}, which is in use",
                    )
            elif kind == "copy":
                if cow_src is None:
                    raise InvariantViolation(
                        "cow-missing",
                        f"`{code}` writes into block {block}, which another sequence still "
                        "reads; a shared partial block must be copied first",
                    )
                if cow_src != old_block or block in in_use:
                    raise InvariantViolation(
                        "cow-missing",
                        f"`{code}` returned Slot({block}, {offset}, {cow_src}); expected a "
                        f"newly allocated block with cow_src={old_block}",
                    )
            else:
                if cow_src is not None or block != old_block:
                    raise InvariantViolation(
                        "cow-sole-owner" if cow_src is not None else "boundary-allocation",
                        f"`{code}` returned Slot({block}, {offset}, {cow_src}); the last block "
                        f"{old_block} has room and this sequence is its only holder, so the "
                        f"token goes there in place: Slot({old_block}, {offset}, None)",
                    )

        def _check_free_count(self, code: str, verb: str) -> None:
            if self.bm.num_free != self.model.num_free:
                raise InvariantViolation(
                    "free-count",
                    f"after `{code}`, num_free is {self.bm.num_free}; expected "
                    f"{self.model.num_free} ({len(self.model.ref)} blocks are in use)",
                )

        @precondition(lambda self: fork and bool(self.model.tables))
        @rule(data=st.data())
        def fork_seq(self, data: st.DataObject) -> None:
            free_ids = [s for s in range(6) if s not in self.model.tables]
            if not free_ids:
                return
            parent = data.draw(st.sampled_from(self._live()), label="parent")
            child = data.draw(st.sampled_from(free_ids), label="child")
            self._fork(parent, child)

        @precondition(lambda self: fork and append and len(self.model.tables) < 5)
        @rule(data=st.data())
        def fork_then_write_all(self, data: st.DataObject) -> None:
            # Copy-on-write has edges random programs reach only by luck: the first writer of a
            # shared partial block copies it, the last writes in place; with no block free the
            # copy raises and changes nothing; a full block is never copied; a block may have
            # three holders (a fork of a fork), or one fewer once one is freed; an empty
            # sequence shares no block. So: fork a sequence (partial, full or empty) once or
            # more, maybe free one of the forks, then write to every one left, in any order.
            free_ids = [s for s in range(6) if s not in self.model.tables]
            size, lens, free = self.model.block_size, self.model.lens, self.model.num_free
            partial = [s for s in self._live() if lens[s] % size]
            full = [s for s in self._live() if lens[s] and not lens[s] % size]
            kinds = [g for g in (partial, full) if g]
            if not kinds or (free and data.draw(st.booleans(), label="new parent")):
                # (with no sequence holding a block, some block is free; none taken: empty)
                parent = free_ids.pop(0)
                blocks = data.draw(st.integers(min_value=0, max_value=free), label="blocks")
                last = data.draw(st.integers(min_value=1, max_value=size), label="last")
                self._allocate(parent, (blocks - 1) * size + last if blocks else 0)
            else:
                kind = data.draw(st.sampled_from(kinds))
                parent = data.draw(st.sampled_from(kind), label="parent")
            family = [parent]
            for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="forks")):
                if free_ids:
                    child = data.draw(st.sampled_from(free_ids), label="child")
                    free_ids.remove(child)
                    self._fork(data.draw(st.sampled_from(family), label="from"), child)
                    family.append(child)
            if len(family) > 2 and data.draw(st.booleans(), label="free one"):
                gone = data.draw(st.sampled_from(family[1:]), label="freed")
                family.remove(gone)
                self._free(gone)
            for seq in data.draw(st.permutations(family), label="writers"):
                if self.model.append_kind(seq) == "inplace" or self.model.num_free > 0:
                    self._append(seq)
                elif errors:
                    self._append_without_room(seq)

        def _fork(self, parent: int, child: int) -> None:
            code = f"bm.fork({parent}, {child})"
            self._call(code, lambda: self.bm.fork(parent, child))
            self.model.fork(parent, child)
            self._check_free_count(code, "holds")
            self._sync(code)
            self.content[child] = list(self.content[parent])

        @precondition(lambda self: bool(self.model.tables))
        @rule(data=st.data())
        def free_seq(self, data: st.DataObject) -> None:
            self._free(data.draw(st.sampled_from(self._live()), label="seq"))

        def _free(self, seq: int) -> None:
            code = f"bm.free_seq({seq})"
            table, before = self.bm.block_table(seq), list(self.bm.free_list())
            self._call(code, lambda: self.bm.free_seq(seq))
            check_freed_tail_first(code, table, before, list(self.bm.free_list()))
            self.model.free(seq)
            del self.content[seq]
            self._check_free_count(code, "holds")
            self._sync(code)

        # --------------------------------------------------- calls that must fail
        @precondition(lambda self: errors)
        @rule(n_tokens=st.integers(min_value=1, max_value=40))
        def allocate_too_much(self, n_tokens: int) -> None:
            free_ids = [s for s in range(6) if s not in self.model.tables]
            if not free_ids or self.model.need(n_tokens) <= self.model.num_free:
                return
            seq = free_ids[0]
            self._expect_error(
                f"bm.allocate({seq}, {n_tokens})",
                lambda: self.bm.allocate(seq, n_tokens),
                "OutOfBlocks",
                f"{self.model.need(n_tokens)} blocks needed, {self.model.num_free} free",
                on_change="all-or-nothing",
            )

        @precondition(
            lambda self: errors and append and bool(self.model.tables) and self.model.num_free == 0
        )
        @rule(data=st.data())
        def append_without_room(self, data: st.DataObject) -> None:
            needy = [s for s in self._live() if self.model.append_kind(s) != "inplace"]
            if not needy:
                return
            self._append_without_room(data.draw(st.sampled_from(needy), label="seq"))

        def _append_without_room(self, seq: int) -> None:
            kind = self.model.append_kind(seq)
            self._expect_error(
                f"bm.append_slot({seq})",
                lambda: self.bm.append_slot(seq),
                "OutOfBlocks",
                "it needs a block and none is free",
                on_change="cow-release-before-allocate" if kind == "copy" else "exception-safety",
            )

        @precondition(lambda self: errors)
        @rule(
            data=st.data(),
            op=st.sampled_from(
                [
                    "append_slot",
                    "free_seq",
                    "fork",
                    "allocate-live",
                    "fork-live",
                    "negative",
                    "not-int",
                ]
            ),
        )
        def bad_call(self, data: st.DataObject, op: str) -> None:
            live = self._live()
            dead = [s for s in range(7) if s not in self.model.tables]
            if op in ("append_slot", "free_seq", "fork"):
                seq = dead[0]
                if op == "append_slot":
                    if not append:
                        return
                    code, fn = f"bm.append_slot({seq})", lambda: self.bm.append_slot(seq)
                elif op == "free_seq":
                    code, fn = f"bm.free_seq({seq})", lambda: self.bm.free_seq(seq)
                else:
                    if not fork:
                        return
                    code, fn = f"bm.fork({seq}, {dead[-1]})", lambda: self.bm.fork(seq, dead[-1])
                self._expect_error(code, fn, "UnknownSequence", f"sequence {seq} is not live")
            elif op == "allocate-live":
                if not live:
                    return
                seq = data.draw(st.sampled_from(live), label="seq")
                n = data.draw(st.sampled_from([1, 0]), label="n_tokens")  # 0: no block to take
                self._expect_error(
                    f"bm.allocate({seq}, {n})",
                    lambda: self.bm.allocate(seq, n),
                    "SequenceExists",
                    f"sequence {seq} is already live",
                )
            elif op == "fork-live":
                if not fork or not live:
                    return
                parent = data.draw(st.sampled_from(live), label="parent")
                child = data.draw(st.sampled_from(live), label="child")
                self._expect_error(
                    f"bm.fork({parent}, {child})",
                    lambda: self.bm.fork(parent, child),
                    "SequenceExists",
                    f"sequence {child} is already live",
                )
            elif op == "not-int":
                # "a token count that is not a non-negative int": a float, even a whole one,
                # is not a count, and a check of the sign alone lets it through
                seq = dead[0]
                n_tokens = data.draw(st.sampled_from([2.5, 3.0, 0.5]), label="n_tokens")
                self._expect_error(
                    f"bm.allocate({seq}, {n_tokens!r})",
                    lambda: self.bm.allocate(seq, n_tokens),
                    "InvalidLength",
                    "a token count must be an int",
                )
            else:
                seq = dead[0]
                self._expect_error(
                    f"bm.allocate({seq}, -1)",
                    lambda: self.bm.allocate(seq, -1),
                    "InvalidLength",
                    "a length cannot be negative",
                )

        # ----------------------------------------------------------- invariants
        @invariant()
        def rules_hold(self) -> None:
            if self.bm is None:
                return
            check_block_manager_invariants(self.bm)
            free = list(self.bm.free_list())
            check_free_order(getattr(self, "free_before", None), free)
            self.free_before = free
            size = self.model.block_size
            for seq, values in self.content.items():
                table = self.bm.block_table(seq)
                for pos, want in enumerate(values):
                    got = self.memory.get((table[pos // size], pos % size))
                    if got != want:
                        raise InvariantViolation(
                            "write-isolation",
                            f"sequence {seq} reads a wrong value at token {pos} (block "
                            f"{table[pos // size]}, offset {pos % size}): another sequence "
                            "wrote into a block it shares",
                        )

    BlockManagerMachine.__name__ = f"{name}Machine"
    BlockManagerMachine.__qualname__ = BlockManagerMachine.__name__
    return BlockManagerMachine
