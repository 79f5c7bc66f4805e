"""The prefix-cache grader passes correct managers and fails every known mistake with its hint."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import hypothesis
import pytest

from buggy_impls import correct_module, diagnosed_hint, mistakes
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.kv.prefix import PrefixCachingBlockManager

TOPIC = "prefix-cache"
MISTAKES = mistakes(TOPIC)


def test_the_real_bugs_have_buggy_implementations() -> None:
    assert {"stale_hash", "evicted_left_in_map", "freed_twice"} <= {m.name for m in MISTAKES}


@pytest.mark.parametrize(
    "impl",
    [PrefixCachingBlockManager, correct_module(TOPIC).PrefixBlockManager],
    ids=["reference", "learner"],
)
def test_correct_managers_pass_every_step(impl: Any) -> None:
    for step in (1, 2):
        assert grade(TOPIC, impl, step=step, out=io.StringIO()).passed


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


STEP_ONE = ["unchained_hash", "no_last_token_cap", "hit_no_refcount"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STEP_ONE)
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_step_one_machine_alone_catches_its_mistakes(name: str, seed: int | None) -> None:
    # step 1 has its own machine (nothing is freed yet): it finds the step-1 mistakes alone
    bug = next(m for m in MISTAKES if m.name == name)
    first = load_topic(TOPIC).step(1)
    check = first.machine
    assert check is not None
    if seed is not None:
        build = check.build
        check = replace(check, build=lambda impl: hypothesis.seed(seed)(build(impl)))
    machine_only = Topic(TOPIC, "machine only", [Step(1, first.title, (), check)])
    with pytest.raises(GradeFailure) as failure:
        grade(machine_only, bug.impl, step=1, out=io.StringIO())
    assert "nothing freed yet" in failure.value.report.text


def test_the_issue_example_of_an_unchained_hash_fails_step_one() -> None:
    bug = next(m for m in MISTAKES if m.name == "unchained_hash")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, bug.impl, step=1, out=io.StringIO())
    assert "bm.allocate(1, [1, 1, 1, 1, 5])" in failure.value.report.code


@pytest.mark.slow
@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_state_machine_alone_catches_each_mistake(mistake: Any, seed: int | None) -> None:
    # Without the probes, the model comparison still finds every planted bug, whatever the
    # seed: a derandomized run's seed changes whenever the machine's source does.
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
