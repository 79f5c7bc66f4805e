"""The scheduler grader: passes correct schedulers, fails every known mistake with its hint."""

from __future__ import annotations

import io
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from buggy_impls import correct_module, diagnosed_hint, mistakes
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.kv.scheduler import Scheduler

TOPIC = "scheduler"
MISTAKES = mistakes(TOPIC)
REPO = Path(__file__).resolve().parents[1]


def test_every_mistake_the_issue_names_has_a_buggy_implementation() -> None:
    names = {m.name for m in MISTAKES}
    for required in (
        "preempt_current",
        "requeue_prompt_only",
        "admit_past_watermark",
        "requeue_back",
        "never_free_finished",
    ):
        assert required in names


@pytest.mark.parametrize("impl", [Scheduler, correct_module(TOPIC).Scheduler])
@pytest.mark.parametrize("step", [1, 2, 3])
def test_correct_schedulers_pass_every_step(impl: Any, step: int) -> None:
    report = grade(TOPIC, impl, step=step, out=io.StringIO())
    assert report.passed and report.text.endswith("PASSED")


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


def test_the_repro_is_code_that_shows_the_mistake() -> None:
    bug = next(m for m in MISTAKES if m.name == "preempt_current")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, bug.impl, out=io.StringIO())
    code = failure.value.report.code
    assert f"sched = {bug.impl.__name__}(bm" in code  # the graded class, by its own name
    namespace: dict[str, Any] = {bug.impl.__name__: bug.impl}
    exec(_imports() + "\n" + code, namespace)
    assert [s.seq_id for s in namespace["out"].preempted] == [0]  # the one that asked


def _imports() -> str:
    return (
        "from servelab.kv.blocks import BlockManager\n"
        "from servelab.kv.scheduler import Sequence\n"
        "from servelab.kv.sim import emit_tokens"
    )


def test_reports_are_deterministic() -> None:
    bug = next(m for m in MISTAKES if m.name == "requeue_back")
    texts = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as failure:
            grade(TOPIC, bug.impl, out=io.StringIO())
        texts.append(failure.value.report.text)
    assert texts[0] == texts[1]


def test_the_state_machine_finds_a_bug_no_probe_names() -> None:
    # Puts each victim after the earlier victims of the step: only two preemptions in one
    # step show it (the newest goes first where the older belongs), which no probe has.
    correct = correct_module(TOPIC).Scheduler

    class VictimsInPreemptionOrder(correct):  # type: ignore[misc, valid-type]
        def preempt(self, victim: Any, out: Any) -> None:
            self.bm.free_seq(victim.seq_id)
            self.waiting.insert(len(out.preempted), victim)
            out.preempted.append(victim)

    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, VictimsInPreemptionOrder, step=3, out=io.StringIO())
    assert "✗ step 3 · state machine" in failure.value.report.text
    assert "where: the difference starts in your `preempt`" in failure.value.report.text


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
    machine_only = Topic(TOPIC, "machine only", [Step(final.number, final.title, (), check)])
    with pytest.raises(GradeFailure) as failure:
        grade(machine_only, mistake.impl, out=io.StringIO())
    assert "state machine" in failure.value.report.text


def test_an_unfinished_exercise_raises_not_implemented() -> None:
    class Unfinished(correct_module(TOPIC).Scheduler):  # type: ignore[misc]
        def admit(self, out: Any) -> None:
            raise NotImplementedError

    with pytest.raises(NotImplementedError):
        grade(TOPIC, Unfinished, step=1, out=io.StringIO())


def test_cli_grades_a_file() -> None:
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "servelab",
            "grade",
            TOPIC,
            "--impl",
            f"{correct_module(TOPIC).__file__}:Scheduler",
            "--step",
            "2",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASSED" in ok.stdout
