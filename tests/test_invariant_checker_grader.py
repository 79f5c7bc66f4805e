"""The invariant-checker grader passes correct checkers and fails every known-wrong one."""

from __future__ import annotations

import io
from typing import Any

import pytest

from buggy_impls import correct_module, mistakes
from servelab.grading import GradeFailure, grade
from servelab.grading.invariant_checker import BAD_STATES, GOOD_STATES, BlockState, flags
from servelab.kv.blocks import BlockManager
from servelab.testing.block_manager import check_invariants
from servelab.testing.core import InvariantViolation

TOPIC = "invariant-checker"
MISTAKES = mistakes(TOPIC)


def test_the_catalogue_states_are_what_they_claim() -> None:
    """Good states pass the reference checker and bad ones break it: the grader is fair."""
    for case in GOOD_STATES:
        check_invariants(case.state)
    for case in BAD_STATES:
        with pytest.raises(InvariantViolation):
            check_invariants(case.state)


def test_correct_checkers_pass_every_step() -> None:
    for checker in (check_invariants, correct_module(TOPIC).check_invariants):
        for step in (1, 2, 3):
            report = grade(TOPIC, checker, step=step, out=io.StringIO())
            assert report.passed


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_wrong_checker_fails_with_a_hint_naming_it(mistake: Any) -> None:
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, mistake.impl, out=io.StringIO())
    report = failure.value.report
    assert mistake.hint.lower() in report.hint.lower(), (mistake.name, report.text)
    assert "bm = BlockState(" in report.code


def test_the_repro_line_rebuilds_the_state() -> None:
    case = BAD_STATES[0]
    namespace: dict[str, Any] = {}
    exec(
        f"from servelab.grading.invariant_checker import BlockState\nbm = {case.state!r}", namespace
    )
    assert repr(namespace["bm"]) == repr(case.state)
    with pytest.raises(InvariantViolation):
        check_invariants(namespace["bm"])


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
    partial = next(m for m in MISTAKES if m.name == "first_sequence_only")
    grade(TOPIC, partial.impl, step=2, out=io.StringIO())
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, partial.impl, step=3, out=io.StringIO())
    assert "step 3" in failure.value.report.text
