"""The block-manager grader passes correct managers and fails every known mistake with its hint."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import hypothesis
import pytest

from buggy_impls import correct_module, diagnosed_hint, mistakes
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.kv.blocks import BlockManager, OutOfBlocks
from servelab.testing.block_manager import check_block_manager_invariants
from servelab.testing.core import InvariantViolation

TOPIC = "block-manager"
MISTAKES = mistakes(TOPIC)


def test_every_seed_mistake_has_a_buggy_implementation() -> None:
    names = {m.name for m in MISTAKES}
    assert {
        "cow_full_blocks",
        "release_before_allocate",
        "fork_no_refcount",
        "allocate_not_atomic",
        "both_writers_copy",
    } <= names


@pytest.mark.parametrize(
    "impl", [BlockManager, correct_module(TOPIC).BlockManager], ids=["reference", "learner"]
)
def test_correct_managers_pass_every_step(impl: Any) -> None:
    for step in (1, 2, 3, 4):
        report = grade(TOPIC, impl, step=step, out=io.StringIO())
        assert report.passed and report.text.endswith("PASSED")


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


@pytest.mark.slow
@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_state_machines_alone_catch_each_mistake(mistake: Any, seed: int | None) -> None:
    """Without the probes, the model comparison still finds every planted bug, whatever the
    seed: a derandomized run's seed changes whenever the machine's source does."""
    final = load_topic(TOPIC).steps[-1]
    check = final.machine
    assert check is not None
    if seed is not None:
        build = check.build
        check = replace(check, build=lambda impl: hypothesis.seed(seed)(build(impl)))
    machines_only = Topic(TOPIC, "machine only", [Step(final.number, final.title, (), check)])
    with pytest.raises(GradeFailure) as failure:
        grade(machines_only, mistake.impl, out=io.StringIO())
    assert "reproduce:" in failure.value.report.text


def test_repro_is_deterministic_and_runs() -> None:
    bug = next(m for m in MISTAKES if m.name == "release_before_allocate")
    texts = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as failure:
            grade(TOPIC, bug.impl, out=io.StringIO())
        texts.append(failure.value.report.text)
    assert texts[0] == texts[1]
    # the repro names the graded class itself (here the catalogue's ``Buggy``) ...
    namespace: dict[str, Any] = {bug.impl.__name__: bug.impl, "OutOfBlocks": OutOfBlocks}
    exec(failure.value.report.code, namespace)  # ... runs as written ...
    with pytest.raises(InvariantViolation):  # ... and leaves the manager corrupted
        check_block_manager_invariants(namespace["bm"])


def test_unfinished_step_reports_not_implemented() -> None:
    class Unfinished(BlockManager):
        def append_slot(self, seq: int) -> Any:
            raise NotImplementedError

    grade(TOPIC, Unfinished, step=1, out=io.StringIO())
    with pytest.raises(NotImplementedError):
        grade(TOPIC, Unfinished, step=2, out=io.StringIO())


@pytest.mark.parametrize(
    ("name", "rule"),
    [("fork_shares_list", "fork-copies-table"), ("blocks_rounded_down", "table-length")],
)
def test_a_probe_reports_the_rule_that_broke_not_its_own(name: str, rule: str) -> None:
    # a shared table list is not a copy-on-write mistake; a count rounded down is not a
    # refcount one: the hint is the broken rule's, even before any diagnosis
    from servelab.grading.block_manager import HINTS

    bug = next(m for m in MISTAKES if m.name == name)
    undiagnosed = replace(load_topic(TOPIC), diagnose=lambda program, impl: None)
    with pytest.raises(GradeFailure) as failure:
        grade(undiagnosed, bug.impl, out=io.StringIO())
    assert failure.value.report.hint == HINTS[rule]


def test_a_freed_table_goes_back_last_block_first() -> None:
    from servelab.testing.free_order import check_freed_tail_first

    check_freed_tail_first("free", [0, 1, 2], [5], [5, 2, 1, 0])
    check_freed_tail_first("free", [0, 1, 2], [5], [5, 2, 0])  # block 1 still held elsewhere
    with pytest.raises(InvariantViolation, match="last block first is \\[2, 1, 0\\]"):
        check_freed_tail_first("free", [0, 1, 2], [5], [5, 0, 1, 2])
    check_freed_tail_first("free", [0, 1, 2], [5], [0, 1, 2, 5])  # another rule's to report


def test_a_free_seq_that_releases_head_first_fails_step_one_with_the_order_named() -> None:
    class HeadFirst(correct_module(TOPIC).AllocatingManager):  # type: ignore[misc, name-defined]
        def free_seq(self, seq: int) -> None:
            table = self.tables.pop(seq)
            del self.lens[seq]
            for block in table:
                self._release(block)

    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, HeadFirst, step=1, out=io.StringIO(), quiet=True)
    assert "last block first" in str(failure.value) and "free_seq" in str(failure.value)
