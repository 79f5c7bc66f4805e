"""Grader topic ``block-manager``: free list, boundary allocation, fork + copy-on-write, safety.

Each probe replays a few lines of learner code (the lines are the repro shown on failure)
and names one known mistake in its hint; the state machine of each step then compares the
implementation with :class:`~servelab.testing.block_manager.BlockManagerModel` on random programs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from servelab.grading._script import Script
from servelab.grading.about import About, Hint
from servelab.grading.block_manager_hints import HINTS
from servelab.grading.block_manager_order import table_in_taken_order
from servelab.grading.observe import Canon, blocks_fields, frozen
from servelab.grading.readings.block_manager import block_manager_reading, one_token_blocks
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
from servelab.testing.expected_error import describe_change, half_made

__all__ = ["HINTS", "TOPIC"]


_NO_RULE = Hint("the state differs from the reference's", About())
"""A probe's hint where what yours did breaks none of the rules the probe knows for certain:
about no place, so a report shows the place and the difference instead."""

_COPY_REPLACES = Hint(
    "copy-on-write replaces the shared block with its copy at the end of the writer's table "
    "(table[-1] = new): the table keeps its length, and the blocks before it stay shared",
    About(("append_slot",), ("tables",)),
)
"""The first-writer probe's hint where the copy was right and the writer's table was not."""


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
    try:
        after = snapshot(bm)
    except Exception as exc:  # an entry left half made: the inspection itself fails
        raise s.fail(
            f"`{line}` raised {kind}, but then {half_made(bm, exc)}: a call that raises "
            "changes nothing"
        ) from None
    if after != before:
        shown = {q for q, table, _ in before[0] if table is None}
        for q, _, n in (e for e in after[0] if e[1] is None and e[0] not in shown):
            s.note(f"bm.seq_len({q})  # {n}")  # a length kept with no table: shown as asked
        raise s.fail(
            f"`{line}` raised {kind} but changed the state before raising "
            f"({describe_change(before, after)})"
        )


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
        f"num_free is {s.ns['bm'].num_free}, expected 6: the reference takes 2 of the 8 blocks",
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
    _no_length(s, 0, "was freed", "freed-no-trace")
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
    _no_length(s, 1, "was refused", "refused-no-trace")
    check_rules(s)


def _no_length(s: Script, seq: int, why: str, hint: str) -> None:
    """A sequence the manager does not hold has no length to read: ``seq_len`` raises, as
    ``block_table`` does, rather than answer from an entry left behind. The line is written
    bare where it answered (the line the report is about, pasted it shows the length), and
    under ``suppress`` where it raised as it should, so a later line still runs."""
    line = f"bm.seq_len({seq})"
    try:
        left = s.ns["bm"].seq_len(seq)
    except Exception:  # nothing recorded: no length to read
        left = None
    if left is None:
        if SUPPRESS_IMPORT not in s.lines:
            s.lines.insert(0, SUPPRESS_IMPORT)
        line = f"with suppress(Exception): {line}"
    s.note(line)
    s.check(left is None, f"bm.seq_len({seq}) is {left!r}; sequence {seq} {why}", hint)


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
    s.check(
        s("bm.num_free") == 7,
        f"num_free is {s.ns['bm'].num_free} after the append, expected 7: in the reference "
        f"token 3 goes into block {first}, which has room, and no block is taken",
    )
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


def _append_without_room(impl: Any) -> None:
    """An append on a boundary with no free block raises OutOfBlocks from `_alloc` before the
    length or the table changes (the introduction's rule 4)."""
    s = _script(impl)
    s("bm = BlockManager(1, 4)")
    s("bm.allocate(0, 4)")
    expect_error(s, "bm.append_slot(0)", "OutOfBlocks", "exception-safety")
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
    before = s("bm.block_table(1)")
    s("bm.append_slot(0)")
    child = s("bm.block_table(1)")
    if len(child) != 1 and child == before:
        # not a table shared with the parent: the child's own table was wrong from the fork
        raise s.fail(
            f"sequence 1's table is {child}, expected 1 block: in the reference the fork "
            "gives it sequence 0's one block, and sequence 0's append leaves it as it is",
            hint=_NO_RULE,
        )
    s.check(
        len(child) == 1,
        f"sequence 0 crossed a boundary, but sequence 1's table changed too: {before} -> {child}",
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
    got = f"got ({block}, {offset}, {src})"
    if block == src:  # the copy's source named as the block written
        got += f", a slot that names block {block}, its cow_src, as the block written to"
    s.check(
        src == partial and offset == 2 and block not in (full, partial),
        f"sequence 0 writes into shared partial block {partial}: expected a new block "
        f"with cow_src={partial} at offset 2, {got}",
    )
    table = s("bm.block_table(0)")
    if table != [full, block]:
        # the copy itself was right (block, offset and cow_src): the table is what differs
        raise s.fail(
            f"sequence 0's table is {table} after its copy, expected {[full, block]}: in the "
            f"reference the copy {block} takes the place of block {partial} at the table's "
            "end; only the last entry changes",
            hint=_COPY_REPLACES,
        )
    ref = s(f"bm.refcount({partial})")
    s.check(
        ref == 1,
        f"refcount({partial}) is {ref} after sequence 0 copied it, expected 1: the reference "
        "drops the copier's reference, and sequence 1 still holds it",
        "cow-drop",
    )
    check_rules(s)


def _second_writer_in_place(impl: Any) -> None:
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 6)")
    s("bm.fork(0, 1)")
    _full, partial = s("bm.block_table(1)")
    s("bm.append_slot(0)")
    free_before = s("bm.num_free")
    ref = s.ns["bm"].refcount(partial)
    block, offset, src = _slot(s, "bm.append_slot(1)")
    s.check(
        (block, offset, src) == (partial, 2, None),
        f"in the reference sequence 0's copy leaves sequence 1 the only holder of block "
        f"{partial} (refcount 1; yours {ref} before this append), so it writes in place: "
        f"expected Slot({partial}, 2, None), got ({block}, {offset}, {src})",
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
def _copy_needs_a_block(impl: Any) -> None:
    """The first writer of a shared partial block with no free block for its copy cannot
    write: a write in place would show its token to the sibling."""
    s = _script(impl)
    s("bm = BlockManager(2, 4)")
    s("bm.allocate(0, 6)")
    s("bm.fork(0, 1)")
    line = "bm.append_slot(0)"
    try:
        got = eval(compile(line, "<probe>", "eval"), s.ns)
    except Exception:
        return  # refused: which error, and the state after it, are step 4's checks
    s.note(line)
    shared = s.ns["bm"].block_table(1)[-1]
    block = got[0] if isinstance(got, tuple) and got else None
    into = f": a slot in block {shared}, which sequence 1 still holds" if block == shared else ""
    raise s.fail(
        f"`{line}` returned {got!r} with no free block for the copy{into}; expected OutOfBlocks"
    )


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


def _copy_of_a_block_three_share(impl: Any) -> None:
    """Three sequences share a partial block and the first writes: the copy is held by the
    writer alone (refcount 1), the source by the two left (refcount 2), not 1 or 3."""
    s = _script(impl)
    s("bm = BlockManager(8, 4)")
    s("bm.allocate(0, 2)")
    s("bm.fork(0, 1)")
    s("bm.fork(0, 2)")
    shared = s("bm.block_table(0)")[-1]
    block, _, _ = _slot(s, "bm.append_slot(0)")
    counts = s(f"bm.refcount({shared}), bm.refcount({block})")
    s.check(
        counts == (2, 1),
        f"(refcount({shared}), refcount({block})) is {counts} after sequence 0 copied block "
        f"{shared}, expected (2, 1): sequences 1 and 2 still hold {shared}, only sequence 0 "
        f"holds its copy {block}",
        "refcount-matches-tables",
    )


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
    slip_reader=one_token_blocks,
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
                _probe(
                    "a table lists its blocks in the order taken",
                    "table-order",
                    lambda impl: table_in_taken_order(_script(impl)),
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
                _probe(
                    "an append with no free block changes nothing",
                    "exception-safety",
                    _append_without_room,
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
                _probe("a copy with no free block raises", "cow-missing", _copy_needs_a_block),
                _probe(
                    "a block three share is copied once",
                    "refcount-matches-tables",
                    _copy_of_a_block_three_share,
                ),
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
