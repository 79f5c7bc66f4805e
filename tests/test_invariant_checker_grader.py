"""The invariant-checker grader passes correct checkers and fails every known-wrong one."""

from __future__ import annotations

import importlib.util
import io
import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from servelab.grading import GradeFailure, grade
from servelab.grading.invariant_checker import (
    BAD_STATES,
    GOOD_STATES,
    BlockState,
    _random_states,
    flags,
)
from servelab.kv.blocks import BlockManager
from servelab.testing.block_manager import check_block_manager_invariants
from servelab.testing.core import InvariantViolation

TOPIC = "invariant-checker"
CATALOGUE = Path(__file__).parent / "buggy" / "invariant_checker"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"invariant_checker_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORRECT = _load(CATALOGUE / "correct.py")
MISTAKES = [
    (path.stem, _load(path)) for path in sorted(CATALOGUE.glob("*.py")) if path.stem != "correct"
]


def test_the_catalogue_states_are_what_they_claim() -> None:
    """Good states pass the reference checker and bad ones break it: the grader is fair."""
    for case in GOOD_STATES:
        check_block_manager_invariants(case.state)
    for case in BAD_STATES:
        with pytest.raises(InvariantViolation):
            check_block_manager_invariants(case.state)


def test_correct_checkers_pass_every_step() -> None:
    for checker in (check_block_manager_invariants, CORRECT.check_invariants):
        for step in (1, 2, 3):
            report = grade(TOPIC, checker, step=step, out=io.StringIO())
            assert report.passed


@pytest.mark.parametrize(("name", "mistake"), MISTAKES, ids=[name for name, _ in MISTAKES])
def test_each_wrong_checker_fails_with_a_hint_naming_it(name: str, mistake: ModuleType) -> None:
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, mistake.Buggy, out=io.StringIO())
    report = failure.value.report
    assert mistake.HINT.lower() in report.hint.lower(), (name, report.text)
    assert "bm = BlockState(" in report.code


def test_the_repro_line_rebuilds_the_state() -> None:
    case = BAD_STATES[0]
    namespace: dict[str, Any] = {}
    exec(
        f"from servelab.grading.invariant_checker import BlockState\nbm = {case.state!r}", namespace
    )
    assert repr(namespace["bm"]) == repr(case.state)
    with pytest.raises(InvariantViolation):
        check_block_manager_invariants(namespace["bm"])


def test_a_checker_that_returns_false_flags_and_its_input_is_a_copy() -> None:
    seen: list[BlockState] = []

    def mutating(bm: BlockState) -> bool:
        seen.append(bm)
        bm.free.clear()
        return False

    state = BlockState.of(BlockManager(4, 4))
    assert flags(mutating, state)
    assert state.free_list() == [0, 1, 2, 3] and seen[0] is not state


def test_an_unwritten_checker_is_reported_as_unfinished() -> None:
    def unwritten(bm: Any) -> None:
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        grade(TOPIC, unwritten, step=1, out=io.StringIO())


def test_state_validation() -> None:
    with pytest.raises(ValueError, match="one count per block"):
        BlockState(4, 4, [], [0, 0], {}, {})
    with pytest.raises(ValueError, match="same sequences"):
        BlockState(1, 4, [], [1], {0: [0]}, {})


def test_random_states_catch_a_checker_that_passes_every_hand_made_state() -> None:
    partial = dict(MISTAKES)["first_sequence_only"].Buggy
    grade(TOPIC, partial, step=2, out=io.StringIO())
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, partial, step=3, out=io.StringIO())
    assert "step 3" in failure.value.report.text


def test_a_block_twice_in_one_table_is_graded_both_by_hand_and_at_random() -> None:
    # Counting holders cannot see one table listing a block twice: the hand-made state is a
    # step-2 case, and every random repeat of a table entry breaks the reference checker.
    from servelab.grading.invariant_checker import _CORRUPTIONS, _repeat_table_entry

    repeat = next(c for c in BAD_STATES if c.name == "a block twice in one table")
    with pytest.raises(InvariantViolation, match="more than once"):
        check_block_manager_invariants(repeat.state)
    assert _repeat_table_entry in _CORRUPTIONS
    rng = random.Random(0)
    repeats = 0
    for _, state in _random_states(seed=0, programs=20, length=12):
        broken = state.copy()
        if "twice" in _repeat_table_entry(broken, rng):
            repeats += 1
            with pytest.raises(InvariantViolation, match="more than once"):
                check_block_manager_invariants(broken)
    assert repeats > 0


def test_a_checker_blind_to_a_repeated_table_entry_passes_step_one_and_fails_step_two() -> None:
    blind = dict(MISTAKES)["no_table_repeat_check"].Buggy
    grade(TOPIC, blind, step=1, out=io.StringIO())
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, blind, step=2, out=io.StringIO())
    assert "a block twice in one table is flagged" in failure.value.report.text


def test_a_reference_manager_never_lists_a_block_twice() -> None:
    bm = BlockManager(8, 2)
    bm.allocate(0, 5)
    bm.fork(0, 1)
    for _ in range(4):
        bm.append_slot(1)
    check_block_manager_invariants(bm)


def test_a_missed_broken_state_says_no_check_fired_and_which_invariant_it_breaks() -> None:
    def lenient(bm: Any) -> None:
        for s in bm.sequences():
            assert len(bm.block_table(s)) * bm.block_size >= bm.seq_len(s)

    with pytest.raises(GradeFailure) as failed:
        grade("invariant-checker", lenient, out=io.StringIO())
    text = failed.value.report.text
    # it returned None: whether a check of its own "fired" is not known, only that it passed
    assert (
        "your checker neither raised nor returned False: it returned None; this state breaks "
        in text
    )


def test_a_flagged_legal_state_names_the_learners_check_that_fired() -> None:
    def strict(bm: Any) -> None:
        for s in bm.sequences():
            for b in bm.block_table(s):
                assert bm.refcount(b) == 1, f"block {b} shared"

    with pytest.raises(GradeFailure) as failed:
        grade("invariant-checker", strict, out=io.StringIO())
    text = failed.value.report.text
    assert 'fired (assert bm.refcount(b) == 1, f"block {b} shared")' in text
    assert "this state breaks no invariant" in text


def _pasted(program: str, name: str, checker: Any) -> bool:
    """Whether ``program``, pasted into a notebook holding ``checker`` as ``name``, fails."""
    namespace: dict[str, Any] = {name: checker}
    try:
        exec(program, namespace)
    except Exception:
        return True
    return False


@pytest.mark.parametrize(("name", "mistake"), MISTAKES, ids=[name for name, _ in MISTAKES])
def test_each_printed_program_fails_when_pasted_and_holds_on_a_right_checker(
    name: str, mistake: ModuleType
) -> None:
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, mistake.Buggy, out=io.StringIO())
    program = failure.value.report.code
    assert "Buggy(bm)" in program and "# must" not in program, program
    assert _pasted(program, "Buggy", mistake.Buggy), program
    assert not _pasted(program, "Buggy", CORRECT.check_invariants), program


def test_a_legal_state_flagged_by_returning_false_fails_when_pasted() -> None:
    def check_invariants(bm: Any) -> bool:
        return all(bm.refcount(b) < 2 for b in range(bm.num_blocks))

    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, check_invariants, out=io.StringIO())
    program = failure.value.report.code
    assert program.endswith(
        '"a legal state: check_invariants(bm) must neither raise nor return False"'
    )
    assert _pasted(program, "check_invariants", check_invariants)
    assert not _pasted(program, "check_invariants", CORRECT.check_invariants)


def test_a_checker_that_reports_problems_in_its_return_value_is_told_to_raise() -> None:
    def collects(bm: Any) -> list[str]:
        free = bm.free_list()
        return ["a block is free twice"] if len(free) != len(set(free)) else []

    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, collects, out=io.StringIO())
    report = failed.value.report
    assert "it returned ['a block is free twice']; this state breaks free-list" in report.text
    assert report.hint.startswith("your checker told this state from the legal ones"), report.hint
    assert "returned ['a block is free twice'] here and [] on each legal state" in report.hint


def test_a_return_that_varies_among_legal_states_is_no_report_of_a_problem() -> None:
    # returns True for an empty manager and falls off (None) otherwise; it lacks the
    # free-list check, and its None on the broken state is no verdict of its own
    def early(bm: Any) -> bool | None:
        if not bm.sequences():
            return True
        for block in bm.free_list():
            assert bm.refcount(block) == 0
        return None

    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, early, out=io.StringIO())
    report = failed.value.report
    assert "a block on the free list twice is flagged" in report.text
    assert "told this state" not in report.hint
    assert report.hint == "check that no block appears twice on the free list"


def test_the_reference_counts_one_holder_in_the_singular() -> None:
    one = BlockState(2, 4, [1], [2, 0], {0: [0]}, {0: 1})
    with pytest.raises(InvariantViolation, match="refcount 2 but 1 table entry holds it"):
        check_block_manager_invariants(one)
    none = BlockState(2, 4, [1], [1, 0], {}, {})
    with pytest.raises(InvariantViolation, match="refcount 1 but 0 table entries hold it"):
        check_block_manager_invariants(none)


def _counts_each_table_once(bm: Any) -> None:
    """The notebook's checker with its holders counted per table (``set(table)``) and no check
    that a table lists each block once: a repeat whose refcount counts it once looks legal."""
    free = bm.free_list()
    assert len(free) == len(set(free))
    held = [0] * bm.num_blocks
    for seq in bm.sequences():
        table, n = bm.block_table(seq), bm.seq_len(seq)
        assert len(table) == -(-n // bm.block_size)
        for block in set(table):
            held[block] += 1
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block]
        assert (block in free) == (held[block] == 0)


def test_a_repeat_counted_once_by_its_refcount_is_a_step_two_case() -> None:
    grade(TOPIC, _counts_each_table_once, step=1, out=io.StringIO())
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, _counts_each_table_once, step=2, out=io.StringIO())
    text = failure.value.report.text
    assert "✗ step 2 · a block twice in one table with refcount 1 is flagged" in text
    assert "ref=[1, 0, 0, 0, 0, 0], tables={0: [0, 0]}" in text
    # the repeat whose refcount counts both entries is flagged by its refcount already
    assert "✓ step 2 · a block twice in one table is flagged" in text


def _skips_the_last_sequence(bm: Any) -> None:
    """The notebook's checker whose loop over the sequences stops one short."""
    held = [0] * bm.num_blocks
    seqs = bm.sequences()
    for i in range(len(seqs) - 1):
        for block in bm.block_table(seqs[i]):
            held[block] += 1
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block]


def test_a_checker_that_flags_the_plainer_state_too_is_not_told_about_sharing() -> None:
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, _skips_the_last_sequence, step=1, out=io.StringIO())
    report = failure.value.report
    assert "✗ step 1 · blocks shared after a fork passes" in report.text
    assert report.hint.startswith(
        "your checker also flags a plainer legal state, allocate(0, 6) alone, nothing shared "
        "(bm = BlockState(num_blocks=6, block_size=4, free=[2, 3, 4, 5], ref=[1, 1, 0, 0, 0, 0]"
    )
    assert "not with 1" not in report.hint


def test_a_checker_wrong_only_about_sharing_keeps_the_sharing_hint() -> None:
    blind = dict(MISTAKES)["refcount_must_be_one"].Buggy
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, blind, step=1, out=io.StringIO())
    assert failure.value.report.hint.startswith("a refcount above 1 is legal")
