"""The eviction-policy grader: passes correct LFU/SIEVE classes, fails each known mistake."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import hypothesis
import pytest

from buggy_impls import correct_module, diagnosed_hint, mistakes
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.weights.policies import LFU, SIEVE

TOPIC = "eviction-policy"
MISTAKES = mistakes(TOPIC)


def test_every_mistake_named_in_the_issue_is_kept() -> None:
    names = {m.name for m in MISTAKES}
    assert {"lfu_newest_tie", "sieve_no_wrap", "sieve_keeps_visited"} <= names
    assert {"lfu_ignores_pins", "sieve_ignores_pins"} <= names


@pytest.mark.parametrize(
    "impl",
    [{"LFU": LFU, "SIEVE": SIEVE}, correct_module(TOPIC).Correct, correct_module(TOPIC)],
    ids=["reference", "learner-dict", "learner-module"],
)
def test_correct_policies_pass_every_step(impl: Any) -> None:
    report = grade(TOPIC, impl, out=io.StringIO())
    assert report.passed and report.text.endswith("PASSED")


def test_step_one_takes_a_single_lfu_class() -> None:
    assert grade(TOPIC, correct_module(TOPIC).LFU, step=1, out=io.StringIO()).passed
    with pytest.raises(GradeFailure, match="grades a SIEVE class"):
        grade(TOPIC, correct_module(TOPIC).LFU, step=2, out=io.StringIO())


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


@pytest.mark.slow
@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_state_machine_alone_catches_each_mistake(mistake: Any, seed: int | None) -> None:
    # Without the probes, the final step's machine (LFU and SIEVE, a policy per program) still
    # finds it, whatever the seed: a derandomized run's seed changes whenever the machine's
    # source does.
    step = load_topic(TOPIC).step(2)
    check = step.machine
    assert check is not None
    if seed is not None:
        build = check.build
        check = replace(check, build=lambda impl: hypothesis.seed(seed)(build(impl)))
    machine_only = Topic(TOPIC, "machine only", [Step(step.number, step.title, (), check)])
    with pytest.raises(GradeFailure) as failure:
        grade(machine_only, mistake.impl, out=io.StringIO())
    assert "against their models" in failure.value.report.text


def test_the_state_machine_catches_what_no_probe_names() -> None:
    bug = next(m for m in MISTAKES if m.name == "sieve_unpin_forgets_visit")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, bug.impl, step=2, out=io.StringIO())
    report = failure.value.report
    assert "LFU and SIEVE against their models" in report.text
    # the repro is code: replayed on the buggy class it ends in the wrong victim
    namespace: dict[str, Any] = {"SIEVE": bug.impl["SIEVE"]}
    exec(report.code, namespace)
    replay: dict[str, Any] = {"SIEVE": correct_module(TOPIC).SIEVE}
    lines = report.code.splitlines()
    exec("\n".join(lines[:-1]), replay)
    assert lines[-1].startswith("p.")
