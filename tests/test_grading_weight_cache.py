"""The weight-cache grader: passes correct caches, fails every known mistake with its hint."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from buggy_impls import correct_module, diagnosed_hint, mistakes, topic_dir
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.weights import WeightCache

TOPIC = "weight-cache"
MISTAKES = mistakes(TOPIC)


def test_there_are_known_mistakes_for_every_seed_item() -> None:
    names = {m.name for m in MISTAKES}
    for required in (
        "count_based",
        "no_pinning",
        "miss_instead_of_raise",
        "evict_exactly_one",
        "set_pins",
        "replace_without_release",
        "evict_then_raise",
    ):
        assert required in names


@pytest.mark.parametrize("impl", [WeightCache, correct_module(TOPIC).WeightCache])
def test_correct_caches_pass_every_step(impl: Any) -> None:
    report = grade(TOPIC, impl, out=io.StringIO())
    assert report.passed and report.text.endswith("PASSED")


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


def test_failure_report_is_deterministic_and_pasteable() -> None:
    bug = next(m for m in MISTAKES if m.name == "replace_without_release")
    texts = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as failure:
            grade(TOPIC, bug.impl, out=io.StringIO())
        texts.append(failure.value.report.text)
    assert texts[0] == texts[1]
    # the repro is code: it builds the graded class by its own name, runs against it and
    # shows the wrong state
    code = failure.value.report.code
    assert code.startswith(f"cache = {bug.impl.__name__}(")
    namespace: dict[str, Any] = {bug.impl.__name__: bug.impl}
    exec(code.split("cache.keys()")[0], namespace)
    assert namespace["cache"].used != sum(
        namespace["cache"]._entries[k][0] for k in namespace["cache"].keys()
    )


def test_state_machine_finds_a_bug_no_probe_names() -> None:
    # pinned keys silently leave the recency order on unpin: only the model comparison sees it
    correct = correct_module(TOPIC).WeightCache

    class UnpinMovesToFront(correct):  # type: ignore[misc, valid-type]
        def unpin(self, key: Any) -> Any:
            left = super().unpin(key)
            self._entries.move_to_end(key, last=False)
            return left

    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, UnpinMovesToFront, step=3, out=io.StringIO())
    assert "state machine" in failure.value.report.text


@pytest.mark.slow
@pytest.mark.parametrize("name", [m.name for m in MISTAKES])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_state_machine_alone_catches_listed_mistakes(name: str, seed: int | None) -> None:
    # The probes name mistakes quickly; the model comparison must not depend on them, nor on
    # the seed: a derandomized run's seed changes whenever the machine's source does.
    bug = next(m for m in MISTAKES if m.name == name)
    final = load_topic(TOPIC).step(5)
    assert final.machine is not None
    check = final.machine
    if seed is not None:
        build = check.build
        check = dataclasses.replace(check, build=lambda impl: hypothesis.seed(seed)(build(impl)))
    machine_only = Topic(TOPIC, "machine only", [Step(5, final.title, (), check)])
    with pytest.raises(GradeFailure) as failure:
        grade(machine_only, bug.impl, out=io.StringIO())
    assert "state machine" in failure.value.report.text


def test_unfinished_step_raises_not_implemented() -> None:
    class Skeleton:
        def __init__(self, capacity_bytes: int) -> None:
            self.capacity = capacity_bytes

        def put(self, key: Any, value: Any, size: int) -> None:
            raise NotImplementedError()

    with pytest.raises(NotImplementedError):
        grade(TOPIC, Skeleton, step=1, out=io.StringIO())


def test_a_hang_is_reported_within_seconds() -> None:
    bug = next(m for m in MISTAKES if m.name == "endless_loop")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, bug.impl, step=4, out=io.StringIO())
    assert "never returned" in failure.value.report.hint
    # the hang is the hint; where the difference starts is shown beside it
    assert "where: the difference starts in your `_check_can_admit`" in failure.value.report.text


def test_unknown_topic_and_step_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown topic"):
        grade("no-such-topic", WeightCache)
    with pytest.raises(ValueError, match="no step 9"):
        grade(TOPIC, WeightCache, step=9)
    assert [s.number for s in load_topic(TOPIC).steps] == [1, 2, 3, 4, 5]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servelab", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_exit_codes() -> None:
    folder = topic_dir(TOPIC)
    ok = _cli(
        "grade", TOPIC, "--impl", f"{correct_module(TOPIC).__file__}:WeightCache", "--step", "2"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASSED" in ok.stdout
    bad = _cli("grade", TOPIC, "--impl", f"{folder / 'set_pins.py'}:Buggy", "--step", "3")
    assert bad.returncode == 1 and "pins in a set" in bad.stdout
    missing = _cli("grade", TOPIC, "--impl", f"{Path(folder) / 'nope.py'}:X")
    assert missing.returncode == 2 and "no such file" in missing.stderr
