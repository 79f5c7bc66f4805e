"""Grader topic ``block-manager``: free list, boundary allocation, fork + copy-on-write, safety.

Each probe replays a few lines of learner code (the lines are the repro shown on failure)
and names one known mistake in its hint; the state machine of each step then compares the
implementation with :class:`~servelab.testing.block_manager.BlockManagerModel` on random programs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from servelab.grading._script import Script
from servelab.grading.about import RESULT, About, Hint
from servelab.grading.observe import Canon, blocks_fields, frozen
from servelab.grading.readings.block_manager import block_manager_reading
from servelab.grading.replay import TopicReplay, plain, program
from servelab.grading.topic import MachineCheck, Probe, Step, Topic
from servelab.kv import blocks
from servelab.testing.block_manager import (
    INVARIANTS,
    SUPPRESS_IMPORT,
    block_manager_machine,
    check_block_manager_invariants,
    check_free_order,
    check_freed_tail_first,
    error_matches,
    snapshot,
    wrong_class,
)
from servelab.testing.core import InvariantViolation

__all__ = ["HINTS", "TOPIC"]


def _script(impl: Any) -> Script:
    return Script.graded(REPLAY, impl, HINTS)


def check_rules(s: Script, check: Callable[[Any], None] | None = None) -> None:
    """Check the rules that always hold; a break is reported with that rule's own hint."""
    try:
        (check or check_block_manager_invariants)(s.ns["bm"])
    except InvariantViolation as exc:
        raise s.fail(exc.detail, exc.invariant) from None


def expect_error(s: Script, line: str, kind: str, hint: str = "expected-error") -> None:
    """Run ``line``; it must raise ``kind`` and leave ``bm`` exactly as it was."""
    bm = s.ns["bm"]
    before = snapshot(bm)
    if SUPPRESS_IMPORT not in s.lines:
        s.lines.insert(0, SUPPRESS_IMPORT)
    s.note(f"with suppress({kind}): {line}")
    try:
        eval(compile(line, "<probe>", "eval"), s.ns)
    except Exception as exc:
        if not error_matches(exc, kind):
            raise s.fail(
                f"`{line}` raised {type(exc).__name__}: {exc}; expected {kind}"
                f"{wrong_class(exc, kind)}",
                hint,
            ) from None
    else:
        raise s.fail(f"`{line}` returned normally; expected it to raise {kind}", hint)
    if snapshot(bm) != before:
        raise s.fail(f"`{line}` raised {kind} but changed the state before raising")


def _slot(s: Script, line: str) -> tuple[int, int, int | None]:
    result = s(line)
    try:
        block, offset, cow_src = result
    except (TypeError, ValueError):
        raise s.fail(
            f"`{line}` returned {result!r}; expected a (block, offset, cow_src) tuple"
        ) from None
    return block, offset, cow_src


# ------------------------------------------------------------------ step 1 probes
def _allocate_takes_blocks(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 6)")
    table = s("bm.block_table(0)")
    s.check(
        len(table) == 2,
        f"6 tokens in 4-token blocks need 2 blocks; the table is {table}",
        "table-length",
    )
    s.check(
        s("bm.num_free") == 6,
        f"num_free is {s.ns['bm'].num_free} after taking 2 of 8",
        "free-count",
    )
    for b in table:
        s.check(s(f"bm.refcount({b})") == 1, f"block {b} is held once; refcount should be 1")
    s.check(
        not set(table) & set(s("bm.free_list()")), "allocated blocks are still free", "free-list"
    )
    check_rules(s)


def _free_returns_blocks(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 6)")
    s("bm.allocate(1, 3)")
    s("bm.free_seq(0)")
    s.check(s("bm.num_free") == 7, f"num_free is {s.ns['bm'].num_free}; expected 7")
    s.check(s("bm.sequences()") == [1], "sequence 0 should be gone after free_seq(0)", "free-list")
    check_rules(s)
    s("bm.free_seq(1)")
    s.check(sorted(s("bm.free_list()")) == list(range(8)), "every block should be free again")
    check_rules(s)


def _free_tail_first(impl: Any) -> None:
    """The notebook's order: a freed table goes back last block first, so in a prefix cache
    the tail is reused first and the shareable head stays cached longest."""
    s = _script(impl)
    s("bm = BlockManager(16, 4)")  # room to spare: only the order of release is at stake
    s("bm.allocate(0, 9)")
    s("bm.allocate(1, 3)")
    table = s("bm.block_table(0)")
    before = s("bm.free_list()")
    s("bm.free_seq(0)")
    after = s("bm.free_list()")
    check_rules(s, lambda bm: check_free_order(before, after))
    check_rules(s, lambda bm: check_freed_tail_first("bm.free_seq(0)", table, before, after))
    check_rules(s)


def _room_is_what_is_free(impl: Any) -> None:
    """Six tokens need 3 of the 4 blocks: the pool could hold them, the 2 free ones cannot."""
    s = _script(impl)
    s("bm = BlockManager(4, 2)")
    s("bm.allocate(0, 4)")
    expect_error(s, "bm.allocate(1, 6)", "OutOfBlocks")
    s.note("with suppress(KeyError): bm.seq_len(1)")
    try:
        left = s.ns["bm"].seq_len(1)
    except Exception:  # nothing recorded: no length to read
        left = None
    s.check(left is None, f"bm.seq_len(1) is {left!r}; sequence 1 was refused", "refused-no-trace")
    check_rules(s)


def _ceil_blocks(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    for seq, n, want in ((0, 4, 1), (1, 5, 2), (2, 0, 0), (3, 1, 1)):
        s(f"bm.allocate({seq}, {n})")
        got = len(s(f"bm.block_table({seq})"))
        s.check(got == want, f"{n} tokens in 4-token blocks need {want} blocks, got {got}")
    check_rules(s)


# ------------------------------------------------------------------ step 2 probes
def _append_fills_then_allocates(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 3)")
    (first,) = s("bm.block_table(0)")
    block, offset, src = _slot(s, "bm.append_slot(0)")
    s.check(
        (block, offset, src) == (first, 3, None),
        f"token 3 goes to offset 3 of block {first} (it has room), got ({block}, {offset}, {src})",
    )
    s.check(s("bm.num_free") == 7, "no block should be allocated while the last one has room")
    block, offset, src = _slot(s, "bm.append_slot(0)")
    s.check(
        offset == 0 and src is None and block != first,
        f"token 4 crosses the boundary: a new block at offset 0, got ({block}, {offset}, {src})",
    )
    s.check(s("bm.block_table(0)") == [first, block], "the new block goes at the table's end")
    check_rules(s)


def _append_to_empty(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(2, 4)")
    s("bm.allocate(0, 0)")
    block, offset, src = _slot(s, "bm.append_slot(0)")
    s.check(
        offset == 0 and src is None and s("bm.block_table(0)") == [block],
        "a sequence with no tokens gets its first block on its first append",
    )
    check_rules(s)


# ------------------------------------------------------------------ step 3 probes
def _fork_counts(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 6)")
    s("bm.fork(0, 1)")
    t0, t1 = s("bm.block_table(0)"), s("bm.block_table(1)")
    s.check(t0 == t1, f"a fork shares every block: tables {t0} and {t1} differ")
    for b in t0:
        s.check(
            s(f"bm.refcount({b})") == 2,
            f"block {b} is in two tables; refcount must be 2",
            "fork-refcount",
        )
    s("bm.free_seq(0)")
    s.check(
        not set(t1) & set(s("bm.free_list()")),
        "freeing the parent put blocks on the free list that the child still uses",
        "free-list",
    )
    check_rules(s)


def _fork_tables_independent(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 4)")
    s("bm.fork(0, 1)")
    s("bm.append_slot(0)")
    child = s("bm.block_table(1)")
    s.check(
        len(child) == 1,
        f"sequence 0 crossed a boundary, but sequence 1's table changed too: {child}",
        "fork-copies-table",
    )
    check_rules(s)


def _first_writer_copies(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 6)")
    s("bm.fork(0, 1)")
    full, partial = s("bm.block_table(0)")
    block, offset, src = _slot(s, "bm.append_slot(0)")
    s.check(
        src == partial and offset == 2 and block not in (full, partial),
        f"sequence 0 writes into shared partial block {partial}: expected a new block "
        f"with cow_src={partial} at offset 2, got ({block}, {offset}, {src})",
    )
    s.check(s("bm.block_table(0)") == [full, block], "only the last entry changes")
    s.check(s(f"bm.refcount({partial})") == 1, "the copier must drop its reference", "cow-drop")
    check_rules(s)


def _second_writer_in_place(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 6)")
    s("bm.fork(0, 1)")
    _full, partial = s("bm.block_table(1)")
    s("bm.append_slot(0)")
    free_before = s("bm.num_free")
    block, offset, src = _slot(s, "bm.append_slot(1)")
    s.check(
        (block, offset, src) == (partial, 2, None),
        f"sequence 1 is now the only holder of block {partial}: expected Slot({partial}, "
        f"2, None), got ({block}, {offset}, {src})",
    )
    s.check(s("bm.num_free") == free_before, "writing in place takes no block")
    check_rules(s)


def _full_blocks_not_copied(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 8)")
    s("bm.fork(0, 1)")
    shared = s("bm.block_table(0)")
    block, offset, src = _slot(s, "bm.append_slot(1)")
    s.check(
        src is None and offset == 0 and block not in shared,
        f"both blocks are full: sequence 1 needs only a new block, got ({block}, {offset}, {src})",
    )
    s.check(s("bm.block_table(1)")[:2] == shared, "the full blocks must stay shared")
    s.check(s("bm.num_free") == 5, "exactly one new block should be taken", "cow-full-block")
    check_rules(s)


# ------------------------------------------------------------------ step 4 probes
def _allocate_all_or_nothing(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(4, 4)")
    s("bm.allocate(0, 8)")
    expect_error(s, "bm.allocate(1, 12)", "OutOfBlocks")
    s.check(s("bm.num_free") == 2, "a failed allocate must not take any block", "all-or-nothing")
    check_rules(s)


def _cow_allocates_first(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(2, 4)")
    s("bm.allocate(0, 6)")
    s("bm.fork(0, 1)")
    expect_error(s, "bm.append_slot(0)", "OutOfBlocks")
    check_rules(s)


def _boundary_out_of_blocks(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(1, 4)")
    s("bm.allocate(0, 4)")
    expect_error(s, "bm.append_slot(0)", "OutOfBlocks")
    check_rules(s)


def _bad_calls(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 5)")
    expect_error(s, "bm.allocate(0, 1)", "SequenceExists")
    expect_error(s, "bm.allocate(1, -1)", "InvalidLength")
    expect_error(s, "bm.append_slot(7)", "UnknownSequence")
    expect_error(s, "bm.fork(7, 8)", "UnknownSequence")
    expect_error(s, "bm.fork(7, 0)", "UnknownSequence", "parent-first")  # child 0 is live
    s("bm.fork(0, 1)")
    expect_error(s, "bm.fork(0, 1)", "SequenceExists")
    s("bm.free_seq(1)")
    expect_error(s, "bm.free_seq(1)", "UnknownSequence")
    expect_error(s, "bm.allocate(1, '3')", "InvalidLength")  # not compared with 0 first
    check_rules(s)


HINTS: dict[str, Hint] = {
    "free-list": Hint(
        "a block is free exactly when its refcount is 0 (free_seq must not ignore the "
        "refcount): release one reference per table entry, and put the block back on the free "
        "list when the count reaches 0, and only then",
        About(("_release", "free_seq"), ("free", "num_free", "refcounts")),
    ),
    "refcount-matches-tables": Hint(
        "every time a table gains or loses a block, its refcount must "
        "move with it (allocate, fork and free_seq)",
        About(("allocate", "fork", "free_seq", "_alloc", "_release"), ("refcounts",)),
    ),
    "table-distinct": Hint(
        "each entry of a table is a block of its own: a table never lists one block twice",
        About(("allocate", "append_slot"), ("tables",)),
    ),
    "table-length": Hint(
        "a table holds ceil(len / block_size) blocks: allocate on a boundary "
        "crossing, not before and not after",
        About(("allocate", "append_slot"), ("tables", "lengths")),
    ),
    "length": Hint(
        "a sequence's length counts its tokens: allocate sets it, and append_slot raises "
        "it by one on every call, whichever branch it takes (a new block, a copy, in place)",
        About(("allocate", "append_slot"), ("lengths",)),
    ),
    "free-order-take": Hint(
        "the free list is a queue: `_alloc` takes the block at its left end "
        "(popleft), the block that has been free longest",
        About(("_alloc",), ("free",)),
    ),
    "free-order-return": Hint(
        "the free list is a queue: `_release` puts a block whose refcount "
        "reaches 0 at its right end (append), behind the blocks already free",
        About(("_release",), ("free",)),
    ),
    "free-tail-first": Hint(
        "free_seq releases a table tail first (last block first): the block freed first is "
        "reused first, so a prefix cache keeps a prompt's shareable head longest",
        About(("free_seq",), ("free",)),
    ),
    "free-count": Hint(
        "num_free differs from the model's: was a block taken that was not needed (a "
        "full block copied?) or one never returned?",
        About((), ("num_free",)),
    ),
    "boundary-allocation": Hint(
        "append_slot allocates only when len % block_size == 0; otherwise "
        "the token goes to offset len % block_size of the last block",
        About(("append_slot",), ("tables", "free", "num_free", RESULT)),
    ),
    "fork-shares": Hint(
        "fork must share the parent's blocks themselves (same ids), raising each "
        "refcount, not allocate new ones",
        About(("fork",), ("tables", "free", "num_free", "refcounts")),
    ),
    "fork-refcount": Hint(
        "fork must raise the refcount of every block it shares: two tables hold it",
        About(("fork",), ("refcounts",)),
    ),
    "fork-copies-table": Hint(
        "fork gives the child its own list (list(table)): sharing the parent's "
        "list object makes every block one sequence appends show up in the other's table",
        About(("fork",), ("tables",)),
    ),
    "cow-drop": Hint(
        "after copying a shared block, the writer drops its reference to the old one "
        "(release it), or the block leaks and its other holder keeps copying",
        About(("append_slot",), ("refcounts",)),
    ),
    "cow-full-block": Hint(
        "copy-on-write applies to the trailing partial block only; full blocks "
        "are never written again, so copying them turns a fork into a full copy",
        About(("append_slot",)),
    ),
    "cow-sole-owner": Hint(
        "only the first writer copies: after it drops its reference the other "
        "holder has refcount 1 and writes in place; decide by refcount, not by 'was forked'",
        About(("append_slot",)),
    ),
    "cow-missing": Hint(
        "a write into a partial block with refcount > 1 must copy it first "
        "(return cow_src) — otherwise the sibling sees the token",
        About(("append_slot",)),
    ),
    "write-isolation": Hint(
        "a write landed in a block another sequence reads: check refcounts "
        "before writing, and never hand out a block that is still in use",
        About(("append_slot", "_alloc")),
    ),
    "expected-error": Hint(
        "raise the documented error: OutOfBlocks, UnknownSequence, SequenceExists or InvalidLength",
        About(("allocate", "append_slot", "fork", "free_seq", "_known", "_new")),
    ),
    "parent-first": Hint(
        "fork checks its parent before its child: an unknown parent raises UnknownSequence "
        "whatever the child is, a live child id included",
        About(("fork", "_known", "_new")),
    ),
    "room-is-free": Hint(
        "allocate compares the blocks needed with the free blocks (len(self.free)), not with "
        "the pool: a request the free list cannot hold raises OutOfBlocks and takes nothing",
        About(("allocate",), ("free", "num_free", "tables")),
    ),
    "refused-no-trace": Hint(
        "a refused allocate records nothing: check the room before setting the length or "
        "taking a block, so the refused sequence has no table and no length",
        About(("allocate",), ("lengths", "tables")),
    ),
    "all-or-nothing": Hint(
        "allocate must check that enough blocks are free before taking any: all or nothing",
        About(("allocate",), ("free", "num_free")),
    ),
    "cow-release-before-allocate": Hint(
        "allocate the replacement block before releasing the shared "
        "one, so OutOfBlocks leaves the table and refcounts untouched",
        About(("append_slot",)),
    ),
    "exception-safety": Hint(
        "validate everything before changing anything, so a raised error "
        "leaves the manager exactly as it was",
        About(("allocate", "append_slot", "fork", "free_seq")),
    ),
    "exception": Hint(
        "a call raised an unexpected error; the repro above shows which",
        About(),
    ),
}


STEP_INVARIANTS: dict[int, list[str]] = {
    1: [
        "free-list",
        "refcount-matches-tables",
        "table-length",
        "length",
        "free-count",
        "free-order-take",
        "free-order-return",
        "free-tail-first",
    ],
    2: ["boundary-allocation", "write-isolation"],
    3: ["fork-shares", "cow-full-block", "cow-sole-owner", "cow-missing"],
    4: ["expected-error", "all-or-nothing", "cow-release-before-allocate", "exception-safety"],
}


def _machine(
    step: int,
    title: str,
    *,
    append: bool,
    fork: bool,
    errors: bool,
    examples: int = 80,
    steps: int = 30,
) -> MachineCheck:
    def build(impl: Any) -> Any:
        return block_manager_machine(impl, append=append, fork=fork, errors=errors)

    ids = [i for n in range(1, step + 1) for i in STEP_INVARIANTS[n]]
    return MachineCheck(title, build, [INVARIANTS[i] for i in ids], HINTS, examples, steps)


def _probe(name: str, hint_id: str, run: Callable[[Any], None]) -> Probe:
    return Probe(name, HINTS[hint_id], run)


# ----------------------------------------------------------------- replay and diagnosis


def blocks_ns(name: str) -> Callable[[Any], dict[str, Any]]:
    def namespace(impl: Any) -> dict[str, Any]:
        ns: dict[str, Any] = {name: impl}
        for error in ("OutOfBlocks", "UnknownSequence", "SequenceExists", "InvalidLength"):
            ns[error] = getattr(blocks, error)
        return ns

    return namespace


def graded_blocks(fields: dict[str, Any]) -> Hashable:
    """Block fields as a replay compares them: the free list's order is left to the order
    checks (a queue, a table freed tail first), which name it; here only a block listed
    twice, or both free and held, counts."""
    free = fields["free"]
    held = {b for t in fields["tables"].values() for b in t}
    fields = dict(fields, free=(len(free), len(free) - len(set(free)), sorted(held & set(free))))
    return frozen(fields)


def _tables(bm: Any, canon: Canon) -> Hashable:
    return graded_blocks(blocks_fields(bm, canon))


def _blocks_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    bm = ns.get("bm")
    return None if bm is None else _tables(bm, canon)


def block_value(value: Any, canon: Canon) -> Hashable:
    if isinstance(value, tuple) and len(value) == 3:  # a Slot(block, offset, cow_src)
        block, offset, src = value
        return ("slot", canon(block), offset, canon(src))
    if isinstance(value, list) and all(_chain_link(v) for v in value):
        return tuple((canon.hashed(h), tuple(tokens)) for h, tokens in value)
    if isinstance(value, list):
        return tuple(plain(v) for v in value)
    return plain(value)


def _chain_link(value: Any) -> bool:
    """A (hash, block tokens) pair of a prefix chain: the hash is the learner's choice."""
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], tuple)


BLOCK_ERRORS = ("OutOfBlocks", "UnknownSequence", "SequenceExists", "InvalidLength")

SEPARATING = (
    program(
        "bm = BlockManager(8, 4)",
        "bm.allocate(0, 6)",
        "bm.fork(0, 1)",
        "bm.append_slot(0)",
        "bm.append_slot(1)",
        "bm.append_slot(1)",
        "bm.append_slot(1)",
        "bm.free_seq(0)",
        "bm.free_seq(1)",
        "bm.free_seq(1)",
    ),
    program(
        "bm = BlockManager(4, 4)",
        "bm.allocate(0, 8)",
        "bm.fork(0, 1)",
        "bm.append_slot(1)",
        "bm.allocate(2, 12)",
        "bm.allocate(2, 3)",
        "bm.fork(2, 3)",
        "bm.append_slot(2)",
        "bm.allocate(4, 0)",
        "bm.append_slot(4)",
    ),
)

REPLAY = TopicReplay(
    "block manager",
    blocks_ns("BlockManager"),
    _blocks_state,
    block_value,
    BLOCK_ERRORS,
    SEPARATING,
    subject="bm",
    classes=("BlockManager",),
    fields=blocks_fields,
    reader=block_manager_reading,
)
"""How diagnosis replays this topic's programs (:mod:`servelab.grading.diagnose`)."""


TOPIC = Topic(
    replay=REPLAY,
    checkpoint="block_manager",
    name="block-manager",
    title="Paged KV-cache block manager",
    steps=[
        Step(
            1,
            "free list and refcounts",
            [
                _probe(
                    "allocate takes blocks off the free list",
                    "refcount-matches-tables",
                    _allocate_takes_blocks,
                ),
                _probe("free_seq returns blocks at refcount 0", "free-list", _free_returns_blocks),
                _probe("ceil(len / block_size) blocks", "table-length", _ceil_blocks),
                _probe("free_seq frees the tail first", "free-tail-first", _free_tail_first),
                _probe(
                    "a request larger than the free blocks takes none",
                    "room-is-free",
                    _room_is_what_is_free,
                ),
            ],
            _machine(1, "allocate / free_seq vs the model", append=False, fork=False, errors=False),
        ),
        Step(
            2,
            "allocation on a boundary crossing",
            [
                _probe(
                    "append fills the last block, then allocates",
                    "boundary-allocation",
                    _append_fills_then_allocates,
                ),
                _probe(
                    "first append of an empty sequence", "boundary-allocation", _append_to_empty
                ),
            ],
            _machine(
                2,
                "allocate / append_slot / free_seq vs the model",
                append=True,
                fork=False,
                errors=False,
            ),
        ),
        Step(
            3,
            "fork, and copy-on-write of the trailing partial block only",
            [
                _probe("fork shares blocks and counts them", "fork-shares", _fork_counts),
                _probe(
                    "a forked sequence has its own table",
                    "fork-copies-table",
                    _fork_tables_independent,
                ),
                _probe(
                    "the first writer copies the shared partial block",
                    "cow-missing",
                    _first_writer_copies,
                ),
                _probe(
                    "the second writer writes in place", "cow-sole-owner", _second_writer_in_place
                ),
                _probe("full blocks stay shared", "cow-full-block", _full_blocks_not_copied),
            ],
            _machine(
                3,
                "allocate / append_slot / fork / free_seq vs the model",
                append=True,
                fork=True,
                errors=False,
            ),
        ),
        Step(
            4,
            "exception safety",
            [
                _probe("allocate is all or nothing", "all-or-nothing", _allocate_all_or_nothing),
                _probe(
                    "copy-on-write allocates before it releases",
                    "cow-release-before-allocate",
                    _cow_allocates_first,
                ),
                _probe(
                    "out of blocks on a boundary changes nothing",
                    "exception-safety",
                    _boundary_out_of_blocks,
                ),
                _probe("bad ids and lengths raise typed errors", "expected-error", _bad_calls),
            ],
            _machine(
                4,
                "every call, valid or not, vs the model",
                append=True,
                fork=True,
                errors=True,
                examples=80,
                steps=40,
            ),
        ),
    ],
)
