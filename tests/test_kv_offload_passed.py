"""From step 3 on, the kv-offload grade takes a dict of three classes: a grade cell that passes
one class says what it passed and what the step takes, not a NameError read as a typo."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade

TOPIC = "kv-offload"


def _report(impl: Any, step: int | None) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step=step, quiet=True)
    return str(failed.value)


def _hint(report: str) -> str:
    return next(line for line in report.splitlines() if line.startswith("    hint: "))[10:]


def test_the_hierarchy_alone_at_step_3_is_told_what_the_step_takes() -> None:
    classes = checkpoint(TOPIC, 3)
    wanted = '{"Tier": EvictingTier, "DiskTier": DiskTier, "Hierarchy": Hierarchy}'
    assert _report(classes["Hierarchy"], 3).splitlines() == [
        "kv-offload · step 3 of 4: the hierarchy: cascade down, promote up",
        f"  ✗ from step 3 on, the grade takes a dict of three classes, {wanted}; this grade "
        "cell passed the class `Hierarchy` alone",
        "    hint: pass the dict, as the notebook's grade cell does: "
        f'grade("kv-offload", {wanted}, step=3)',
        "FAILED",
    ]


@pytest.mark.parametrize("step", [3, 4])
def test_the_grade_line_of_the_hint_runs_as_printed(step: int) -> None:
    classes = checkpoint(TOPIC, step)
    line = _hint(_report(classes["Hierarchy"], step)).split("does: ", 1)[1]
    cell = {cls.__name__: cls for cls in classes.values()}
    report = eval(line, {"grade": lambda *a, **k: grade(*a, **k, quiet=True), **cell})
    assert report.passed


def test_a_dict_short_of_a_class_names_the_one_missing() -> None:
    classes = checkpoint(TOPIC, 3)
    report = _report({"Tier": classes["Tier"], "Hierarchy": classes["Hierarchy"]}, 3)
    assert "this grade cell passed a dict without 'DiskTier'" in report
    assert "NameError" not in report and "typo" not in report


def test_every_step_at_once_asks_for_the_dict_too() -> None:
    report = _report(checkpoint(TOPIC, 3)["Hierarchy"], None)
    assert report.splitlines()[0] == "kv-offload · all 4 steps"
    assert "CostAwareHierarchy" in report and "NameError" not in report


def test_a_tier_class_at_the_tier_steps_is_graded_as_before() -> None:
    assert grade(TOPIC, checkpoint(TOPIC, 2), step=2, quiet=True).passed
