"""Grader topic ``invariant-checker``: the learner's own checker for a block manager's state.

The graded object is a function, ``check_invariants(bm)``, that must *flag* a block manager
whose state breaks a rule (by raising, or by returning ``False``) and *pass* one whose state
is legal (by returning anything else). The grader hands it frozen states, :class:`BlockState`,
with the layout of notebook 03 (``free``, ``ref``, ``tables``, ``lens``) and the inspection
API of every block manager in the course (``free_list()``, ``refcount(b)``, ``sequences()``,
``block_table(s)``, ``seq_len(s)``, ``num_free``).

* Step 1: legal states that an over-strict checker rejects (shared blocks after a fork, an
  empty table, a free list in any order, a full pool) must pass.
* Step 2: states left behind by known bugs (a double free, a fork that forgot the refcount,
  a leak, a table rounded down, a block listed twice in one table ...) must be flagged.
* Step 3: random programs on the reference manager; every state reached must pass, and a
  random corruption of it must be flagged whenever the reference checker flags it.

Every state in a report is printed as one ``BlockState(...)`` line the learner can paste.
"""

from __future__ import annotations

import keyword
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servelab.grading._learner import learner_frame
from servelab.grading.about import About, Hint
from servelab.grading.topic import Probe, ProbeFailed, Step, Topic
from servelab.kv.blocks import BlockManager, OutOfBlocks
from servelab.testing.block_manager import check_block_manager_invariants as reference_check
from servelab.testing.core import InvariantViolation

__all__ = ["BAD_STATES", "GOOD_STATES", "TOPIC", "BlockState", "NamedState", "flags"]

IMPORT_LINE = "from servelab.grading.invariant_checker import BlockState"
#: What every hint of this topic is about: the learner's one graded function.
CHECKER = About(("check_invariants",))


class BlockState:
    """A block manager's state, frozen for a checker to read (nothing here mutates it)."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        free: Iterable[int],
        ref: Sequence[int],
        tables: Mapping[int, Sequence[int]],
        lens: Mapping[int, int],
    ) -> None:
        if len(ref) != num_blocks:
            raise ValueError(f"ref must hold one count per block ({num_blocks}), got {len(ref)}")
        if set(tables) != set(lens):
            raise ValueError("tables and lens must name the same sequences")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free = deque(free)
        self.ref = list(ref)
        self.tables = {seq: list(table) for seq, table in tables.items()}
        self.lens = dict(lens)

    @classmethod
    def of(cls, bm: Any) -> BlockState:
        """The state of any block manager with the course's inspection API."""
        seqs = sorted(bm.sequences())
        return cls(
            bm.num_blocks,
            bm.block_size,
            bm.free_list(),
            [bm.refcount(b) for b in range(bm.num_blocks)],
            {s: bm.block_table(s) for s in seqs},
            {s: bm.seq_len(s) for s in seqs},
        )

    @property
    def num_free(self) -> int:
        return len(self.free)

    def free_list(self) -> list[int]:
        return list(self.free)

    def refcount(self, block: int) -> int:
        return self.ref[block]

    def sequences(self) -> list[int]:
        return list(self.tables)

    def block_table(self, seq: int) -> list[int]:
        return list(self.tables[seq])

    def seq_len(self, seq: int) -> int:
        return self.lens[seq]

    def copy(self) -> BlockState:
        return BlockState(
            self.num_blocks, self.block_size, self.free, self.ref, self.tables, self.lens
        )

    def __repr__(self) -> str:
        return (
            f"BlockState(num_blocks={self.num_blocks}, block_size={self.block_size}, "
            f"free={list(self.free)}, ref={self.ref}, tables={self.tables}, lens={self.lens})"
        )


@dataclass(frozen=True)
class NamedState:
    """A state with the story of how a manager got there; ``hint`` is for the learner.

    A legal state's ``hint`` names the one thing it adds to a plainer legal state, its
    ``contrast`` (story, state): a checker that flags the contrast too is wrong about more
    than that one thing, and is told so instead.
    """

    name: str
    story: str
    state: BlockState
    hint: str
    contrast: tuple[str, BlockState] | None = None


def flags(checker: Callable[[Any], Any], state: BlockState) -> bool:
    """Whether ``checker`` flags ``state``: it raised an Exception, or returned ``False``.

    ``NotImplementedError`` propagates: an unwritten checker is unfinished, not wrong.
    """
    try:
        verdict = checker(state.copy())
    except NotImplementedError:
        raise
    except Exception:
        return True
    return verdict is False


def _after(num_blocks: int, block_size: int, *calls: str) -> BlockState:
    """The state of a reference manager after ``calls`` (e.g. ``"allocate(0, 6)"``)."""
    bm = BlockManager(num_blocks, block_size)
    for call in calls:
        name, _, args = call.partition("(")
        getattr(bm, name)(*(int(a) for a in args.rstrip(")").split(",")))
    return BlockState.of(bm)


def _edit(state: BlockState, change: Callable[[BlockState], None]) -> BlockState:
    broken = state.copy()
    change(broken)
    return broken


_FORK = _after(6, 4, "allocate(0, 6)", "fork(0, 1)")  # blocks 0, 1 shared by sequences 0 and 1

GOOD_STATES: tuple[NamedState, ...] = (
    NamedState(
        "an empty manager",
        "a pool of 4 blocks before any request",
        _after(4, 4),
        "with no sequence, every block is free with refcount 0: nothing to flag",
    ),
    NamedState(
        "blocks shared after a fork",
        "allocate(0, 6); fork(0, 1): blocks 0 and 1 are held by both tables",
        _FORK,
        "a refcount above 1 is legal: compare each block's refcount with the number of table "
        "entries that hold it, not with 1",
        ("allocate(0, 6) alone, nothing shared", _after(6, 4, "allocate(0, 6)")),
    ),
    NamedState(
        "a sequence of zero tokens",
        "allocate(0, 0): an empty table",
        _after(4, 4, "allocate(0, 0)"),
        "ceil(0 / block_size) is 0: an empty table is right for an empty sequence",
        ("allocate(0, 3): one block for three tokens", _after(4, 4, "allocate(0, 3)")),
    ),
    NamedState(
        "a length on a block boundary",
        "allocate(0, 8) with 4-token blocks: exactly 2 full blocks",
        _after(4, 4, "allocate(0, 8)"),
        "use ceil(len / block_size) (in ints: -(-len // block_size)), not len // size + 1",
        ("allocate(0, 7): the last of two blocks partly filled", _after(4, 4, "allocate(0, 7)")),
    ),
    NamedState(
        "a free list out of order",
        "three sequences, then the first and the last freed",
        _after(
            8, 2, "allocate(0, 3)", "allocate(1, 2)", "allocate(2, 4)", "free_seq(0)", "free_seq(2)"
        ),
        "the free list may be in any order; check membership and refcounts, not sorting",
    ),
    NamedState(
        "a full pool",
        "allocate(0, 16) on 4 blocks of 4: nothing is free",
        _after(4, 4, "allocate(0, 16)"),
        "an empty free list is legal when every block is held",
        ("allocate(0, 12) on 4 blocks of 4: one block free", _after(4, 4, "allocate(0, 12)")),
    ),
    NamedState(
        "after copy-on-write",
        "allocate(0, 6); fork(0, 1); append_slot(0): sequence 0 copied its partial block",
        _after(6, 4, "allocate(0, 6)", "fork(0, 1)", "append_slot(0)"),
        "after a copy the old partial block has refcount 1 and the full block still 2",
    ),
    NamedState(
        "a block held by four beams",
        "allocate(0, 3); fork(0, 1); fork(0, 2); fork(1, 3)",
        _after(4, 4, "allocate(0, 3)", "fork(0, 1)", "fork(0, 2)", "fork(1, 3)"),
        "a refcount of 4 with 4 table entries holding the block is legal",
        ("allocate(0, 3); fork(0, 1): two holders", _after(4, 4, "allocate(0, 3)", "fork(0, 1)")),
    ),
)


def _set(attr: str, key: Any, value: Any) -> Callable[[BlockState], None]:
    def change(s: BlockState) -> None:
        getattr(s, attr)[key] = value

    return change


def _then(*changes: Callable[[BlockState], None]) -> Callable[[BlockState], None]:
    def change(s: BlockState) -> None:
        for c in changes:
            c(s)

    return change


_TWO = _after(6, 4, "allocate(0, 6)", "allocate(1, 3)")  # 0: [0, 1], 1: [2]; free [3, 4, 5]

BAD_STATES: tuple[NamedState, ...] = (
    NamedState(
        "a block on the free list twice",
        "block 2 was released twice: it would be handed out to two sequences (in vLLM #42571 "
        "a request whose table listed one block twice freed it twice)",
        _edit(_after(6, 4, "allocate(0, 6)"), lambda s: s.free.append(2)),
        "check that no block appears twice on the free list",
    ),
    NamedState(
        "a free block with a refcount",
        "block 3 is on the free list but its refcount says 1",
        _edit(_TWO, _set("ref", 3, 1)),
        "a block on the free list must have refcount 0",
    ),
    NamedState(
        "a fork that did not raise refcounts",
        "fork(0, 1) copied the table but left blocks 0 and 1 at refcount 1",
        _edit(_FORK, _then(_set("ref", 0, 1), _set("ref", 1, 1))),
        "count, for each block, the table entries that hold it, and compare with its refcount",
    ),
    NamedState(
        "a block freed while a sibling holds it",
        "after a fork, free_seq(1) ignored the refcount: block 1 went back to the free list "
        "while sequence 0 still reads it",
        _edit(
            _after(6, 4, "allocate(0, 6)"),
            _then(lambda s: s.free.append(1), _set("ref", 1, 0)),
        ),
        "a block held by a table must not be on the free list, and its refcount must count it",
    ),
    NamedState(
        "a leaked block",
        "free_seq forgot one block: refcount 0, held by nobody, not on the free list",
        _edit(_TWO, lambda s: s.free.remove(5)),
        "every block is either on the free list or held by a table; a block that is neither "
        "has leaked",
    ),
    NamedState(
        "a refcount never dropped",
        "copy-on-write took a new block but did not release the shared one: refcount 2, one holder",
        _edit(_after(6, 4, "allocate(0, 6)"), _set("ref", 1, 2)),
        "a refcount higher than the number of holders is a leak in waiting",
    ),
    NamedState(
        "a held block on the free list",
        "block 1 went back to the free list while sequence 0 still holds it, its refcount still 1",
        _edit(_after(6, 4, "allocate(0, 6)"), lambda s: s.free.append(1)),
        "a block on the free list must be held by no table (and have refcount 0)",
    ),
    NamedState(
        "refcount errors that cancel out",
        "after a fork, block 0's refcount says 3 and block 1's says 1: the total is still right",
        _edit(_FORK, _then(_set("ref", 0, 3), _set("ref", 1, 1))),
        "compare each block's refcount with its own holders, not the totals",
    ),
    NamedState(
        "a zero-token sequence holding a block",
        "allocate(0, 0) took a block: an empty sequence needs none",
        BlockState(4, 4, [1, 2, 3], [1, 0, 0, 0], {0: [0]}, {0: 0}),
        "a table holds exactly ceil(len / block_size) blocks: none for zero tokens",
    ),
    NamedState(
        "a table rounded down",
        "a sequence of 9 tokens in 4-token blocks holds 2 blocks: its 9th token has no slot",
        _edit(_after(6, 4, "allocate(0, 8)"), _set("lens", 0, 9)),
        "a table holds exactly ceil(len / block_size) blocks",
    ),
    NamedState(
        "a block too many",
        "a sequence of 4 tokens holds 2 blocks: a block allocated before the boundary",
        _edit(_after(6, 4, "allocate(0, 8)"), _set("lens", 0, 4)),
        "a table holds exactly ceil(len / block_size) blocks, no more",
    ),
    NamedState(
        "a block twice in one table",
        "sequence 0's table lists block 0 twice, refcount 2 to match, block 1 back on the free "
        "list: every count agrees, but two of its logical blocks share one physical block",
        BlockState(6, 4, [1, 2, 3, 4, 5], [2, 0, 0, 0, 0, 0], {0: [0, 0]}, {0: 6}),
        "a table lists each block once; counting holders alone cannot see a block listed twice "
        "by the same table",
    ),
    NamedState(
        "a block twice in one table with refcount 1",
        "append_slot put block 0 into sequence 0's table a second time instead of a new block, "
        "its refcount left at 1, block 1 back on the free list: two of its logical blocks share "
        "one physical block",
        BlockState(6, 4, [1, 2, 3, 4, 5], [1, 0, 0, 0, 0, 0], {0: [0, 0]}, {0: 6}),
        "a table lists each block once, whatever the refcounts say: look for a block listed "
        "twice by the same table",
    ),
)


def _state_line(state: BlockState) -> str:
    return f"bm = {state!r}"


def _name(checker: Callable[[Any], Any]) -> str:
    """The name the learner's notebook holds the checker under (``check_invariants`` unless
    the function was defined under another)."""
    name = getattr(checker, "__name__", "")
    return name if name.isidentifier() and not keyword.iskeyword(name) else "check_invariants"


def _must_pass(checker: Callable[[Any], Any], state: BlockState) -> list[str]:
    """The program of a flagged legal state: pasted, it raises where the checker raises and
    fails its assert where the checker returns False, and runs silently on a right one."""
    call = f"{_name(checker)}(bm)"
    return [
        IMPORT_LINE,
        _state_line(state),
        f'assert {call} is not False, "a legal state: {call} must neither raise nor return False"',
    ]


def _must_flag(checker: Callable[[Any], Any], state: BlockState) -> list[str]:
    """The program of a missed broken state: pasted, its assert fails where the checker
    neither raises nor returns False (what ``flags`` asks), and holds on a right one."""
    call = f"{_name(checker)}(bm)"
    return [
        f"{IMPORT_LINE}, flags",
        _state_line(state),
        f'assert flags({_name(checker)}, bm), "a broken state: {call} must raise or return False"',
    ]


def _which_check(checker: Callable[[Any], Any], state: BlockState) -> str:
    """Which of the learner's checks fired on ``state``: the line that raised, a ``False``
    returned, or none."""
    try:
        verdict = checker(state.copy())
    except NotImplementedError:
        raise
    except Exception as exc:
        frame = learner_frame(exc)
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if frame is None:
            return f"your checker raised {what}"
        source = (frame.line or "").strip()
        return f"your check at line {frame.lineno} fired ({source}): {what}"
    if verdict is False:
        return "your checker returned False"
    return f"your checker neither raised nor returned False: it returned {_shown(verdict)}"


def _shown(value: Any) -> str:
    """A checker's return value, short (a learner's ``__repr__`` that raises is not read)."""
    try:
        text = repr(value)
    except Exception:
        return f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _reported_by_return(
    checker: Callable[[Any], Any], broken: BlockState, legal: Sequence[BlockState] = ()
) -> Hint | None:
    """The hint where the checker saw the broken state and said so only in its return value:
    it returns one value on every legal state (the step-1 states, and ``legal``) and another,
    not False, on ``broken``, so its checks told them apart. None otherwise: a return that
    varies among legal states (a path that falls off without ``return``) carries no verdict,
    and a rule the checker lacks is then the likelier cause."""

    def returned(state: BlockState) -> tuple[bool, Any]:
        try:
            return True, checker(state.copy())
        except Exception:
            return False, None

    ok, mine = returned(broken)
    if not ok or mine is False:
        return None
    on_legal = [returned(case.state) for case in GOOD_STATES] + [returned(s) for s in legal]
    if not all(ok for ok, _ in on_legal):
        return None
    passed = on_legal[0][1]
    try:
        if not all(bool(value == passed) for _, value in on_legal) or bool(mine == passed):
            return None
    except Exception:
        return None
    return Hint(
        f"your checker told this state from the legal ones (it returned {_shown(mine)} here "
        f"and {_shown(passed)} on each legal state), but only raising (or returning False) "
        "flags a state: raise, or assert, where a check finds a problem",
        CHECKER,
    )


def _which_invariant(state: BlockState) -> str:
    """The invariant ``state`` breaks, by the reference checker, or that it breaks none."""
    try:
        reference_check(state.copy())
    except InvariantViolation as exc:
        return f"this state breaks {exc.invariant}: {exc.detail}"
    return "this state breaks no invariant"


def _verdicts(checker: Callable[[Any], Any], state: BlockState) -> str:
    return f"{_which_check(checker, state)}; {_which_invariant(state)}"


def _good_probe(case: NamedState) -> Probe:
    def run(checker: Any) -> None:
        if flags(checker, case.state):
            raise ProbeFailed(
                f"your checker flagged a legal state: {case.story}\n"
                f"{_verdicts(checker, case.state)}",
                _must_pass(checker, case.state),
                _also_plainer(checker, case),
            )

    return Probe(case.name + " passes", Hint(case.hint, CHECKER), run)


def _also_plainer(checker: Callable[[Any], Any], case: NamedState) -> Hint | None:
    """The hint where the checker flags the legal state's plainer contrast too: the state's
    own hint names what this state adds, which is then not what the checker gets wrong."""
    if case.contrast is None or not flags(checker, case.contrast[1]):
        return None
    story, plainer = case.contrast
    return Hint(
        f"your checker also flags a plainer legal state, {story} ({_state_line(plainer)}), "
        f"so what it gets wrong is not only what this state adds: follow the check that fired "
        "on the state above, and compare what it computes with the rule it checks",
        CHECKER,
    )


def _bad_probe(case: NamedState) -> Probe:
    def run(checker: Any) -> None:
        if not flags(checker, case.state):
            raise ProbeFailed(
                f"your checker passed a broken state: {case.story}\n"
                f"{_verdicts(checker, case.state)}",
                _must_flag(checker, case.state),
                _reported_by_return(checker, case.state),
            )

    return Probe(case.name + " is flagged", Hint(case.hint, CHECKER), run)


# ------------------------------------------------------------------- random states (step 3)


def _raise_refcount(s: BlockState, r: random.Random) -> str:
    block = r.randrange(s.num_blocks)
    s.ref[block] += 1
    return f"block {block}'s refcount raised"


def _lower_refcount(s: BlockState, r: random.Random) -> str:
    block = r.randrange(s.num_blocks)
    s.ref[block] -= 1
    return f"block {block}'s refcount lowered"


def _duplicate_free(s: BlockState, r: random.Random) -> str:
    if not s.free:
        return _raise_refcount(s, r)
    block = r.choice(list(s.free))
    s.free.append(block)
    return f"block {block} put on the free list twice"


def _drop_free(s: BlockState, r: random.Random) -> str:
    if not s.free:
        return _lower_refcount(s, r)
    block = r.choice(list(s.free))
    s.free.remove(block)
    return f"block {block} dropped from the free list"


def _change_length(s: BlockState, r: random.Random) -> str:
    if not s.lens:
        return _duplicate_free(s, r)
    seq = r.choice(list(s.lens))
    s.lens[seq] = max(0, s.lens[seq] + r.choice((-s.block_size, -1, 1, s.block_size)))
    return f"sequence {seq}'s length changed"


def _drop_table_entry(s: BlockState, r: random.Random) -> str:
    holders = [seq for seq, table in s.tables.items() if table]
    if not holders:
        return _drop_free(s, r)
    seq = r.choice(holders)
    s.tables[seq].pop()
    return f"sequence {seq}'s last table entry dropped"


def _repeat_table_entry(s: BlockState, r: random.Random) -> str:
    holders = [seq for seq, table in s.tables.items() if len(table) > 1]
    if not holders:
        return _swap_refcounts(s, r)
    seq = r.choice(holders)
    table = s.tables[seq]
    i = r.randrange(1, len(table))
    old, table[i] = table[i], table[i - 1]  # counts kept true, so only the repeat shows
    s.ref[old] -= 1
    s.ref[table[i]] += 1
    if s.ref[old] == 0:
        s.free.append(old)
    return f"sequence {seq}'s table lists block {table[i]} twice"


def _free_held(s: BlockState, r: random.Random) -> str:
    held = sorted({b for table in s.tables.values() for b in table})
    if not held:
        return _duplicate_free(s, r)
    block = r.choice(held)
    s.free.append(block)
    return f"held block {block} put on the free list"


def _swap_refcounts(s: BlockState, r: random.Random) -> str:
    held = [b for b in range(s.num_blocks) if s.ref[b] > 0]
    if not held:
        return _raise_refcount(s, r)
    up, down = r.randrange(s.num_blocks), r.choice(held)
    if up == down:
        up = (up + 1) % s.num_blocks
    s.ref[up] += 1
    s.ref[down] -= 1
    return f"block {up}'s refcount raised and block {down}'s lowered"


def _empty_sequence(s: BlockState, r: random.Random) -> str:
    if not s.lens:
        return _free_held(s, r)
    seq = r.choice(list(s.lens))
    s.lens[seq] = 0
    return f"sequence {seq}'s length set to zero"


_CORRUPTIONS: tuple[Callable[[BlockState, random.Random], str], ...] = (
    _raise_refcount,
    _lower_refcount,
    _duplicate_free,
    _drop_free,
    _change_length,
    _drop_table_entry,
    _free_held,
    _swap_refcounts,
    _empty_sequence,
    _repeat_table_entry,
)


def _random_states(seed: int, programs: int, length: int) -> list[tuple[str, BlockState]]:
    """States of a reference manager on random programs, with the calls that led there."""
    rng = random.Random(seed)
    found: list[tuple[str, BlockState]] = []
    for _ in range(programs):
        num_blocks, block_size = rng.choice((4, 6, 8)), rng.choice((1, 2, 4))
        bm = BlockManager(num_blocks, block_size)
        calls = [f"BlockManager({num_blocks}, {block_size})"]
        next_id = 0
        for _ in range(length):
            live = bm.sequences()
            kind = rng.choice(("allocate", "append", "append", "fork", "free"))
            try:
                if kind == "allocate" or not live:
                    n = rng.randrange(0, 9)
                    bm.allocate(next_id, n)
                    call = f"allocate({next_id}, {n})"
                    next_id += 1
                elif kind == "append":
                    seq = rng.choice(live)
                    bm.append_slot(seq)
                    call = f"append_slot({seq})"
                elif kind == "fork":
                    seq = rng.choice(live)
                    bm.fork(seq, next_id)
                    call = f"fork({seq}, {next_id})"
                    next_id += 1
                else:
                    seq = rng.choice(live)
                    bm.free_seq(seq)
                    call = f"free_seq({seq})"
            except OutOfBlocks:
                continue
            calls.append(call)
            found.append(("; ".join(calls), BlockState.of(bm)))
    return found


def _reference_flags(state: BlockState) -> bool:
    try:
        reference_check(state)
    except InvariantViolation:
        return True
    return False


def _random_probe(checker: Any) -> None:
    rng = random.Random(1)
    for calls, state in _random_states(seed=0, programs=60, length=12):
        if flags(checker, state):
            raise ProbeFailed(
                f"your checker flagged a legal state, reached by: {calls}\n"
                f"{_verdicts(checker, state)}",
                _must_pass(checker, state),
            )
        broken = state.copy()
        name = rng.choice(_CORRUPTIONS)(broken, rng)
        if _reference_flags(broken) and not flags(checker, broken):
            raise ProbeFailed(
                f"your checker passed a broken state ({name}) after: {calls}\n"
                f"{_verdicts(checker, broken)}",
                _must_flag(checker, broken),
                _reported_by_return(checker, broken, [state]),
            )


TOPIC = Topic(
    name="invariant-checker",
    title="your own invariant checker for a block manager",
    steps=[
        Step(1, "legal states pass", tuple(_good_probe(c) for c in GOOD_STATES)),
        Step(2, "broken states are flagged", tuple(_bad_probe(c) for c in BAD_STATES)),
        Step(
            3,
            "random states agree with the reference checker",
            (
                Probe(
                    "random programs and random corruptions",
                    Hint(
                        "check every rule for every block and every sequence, not only the "
                        "cases you have seen: the free list (once, refcount 0), refcount = "
                        "holders, table length = ceil(len / block_size)",
                        CHECKER,
                    ),
                    _random_probe,
                ),
            ),
        ),
    ],
)
