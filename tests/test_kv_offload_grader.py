"""The kv-offload grader: passes the notebook's classes, fails every known mistake with its hint."""

from __future__ import annotations

import io
from typing import Any

import pytest

from buggy_impls import diagnosed_hint, mistakes
from servelab import checkpoint
from servelab.grading import GradeFailure, grade

TOPIC = "kv-offload"
MISTAKES = mistakes(TOPIC)


def test_the_mistakes_the_course_must_catch_are_in_the_catalogue() -> None:
    names = {m.name for m in MISTAKES}
    for required in (
        "evicts_pinned",  # a chunk a lookup pinned
        "frees_referenced",  # a chunk a GPU transfer still reads
        "promotes_unpinned",  # evicted mid-retrieve
        "torn_write",  # a crash leaves the disk file torn
        "busy_wait_forever",  # everything pinned, the loop never ends
        "double_counts",  # a chunk in two tiers counted twice
    ):
        assert required in names


@pytest.mark.parametrize("step", [1, 2, 3, 4])
def test_each_checkpoint_passes_its_step(step: int) -> None:
    report = grade(TOPIC, checkpoint(TOPIC, step), step=step, out=io.StringIO())
    assert report.passed and report.text.endswith("PASSED")


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


def test_a_tier_mistake_fails_already_at_its_own_step() -> None:
    pinned = next(m for m in MISTAKES if m.name == "evicts_pinned")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, pinned.impl["Tier"], step=1, out=io.StringIO())
    assert "pinned" in failure.value.report.text


def test_the_failure_report_is_the_same_on_every_run() -> None:
    torn = next(m for m in MISTAKES if m.name == "torn_write")
    texts = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as failure:
            grade(TOPIC, torn.impl, out=io.StringIO())
        texts.append(failure.value.report.text)
    assert texts[0] == texts[1]
    assert "with crashing_writes(): disk.put('b', payload('b', 40))" in texts[0]


def test_a_torn_write_defined_in_a_notebook_is_caught() -> None:
    # In a notebook `open` is IPython's wrapper around the io.open it imported: the simulated
    # crash must reach a disk tier written there too.
    shell = pytest.importorskip("IPython.core.interactiveshell")
    correct = checkpoint(TOPIC, 4)
    ns: dict[str, Any] = {"open": shell._modified_open, "Base": correct["DiskTier"]}
    exec(
        "class DiskTier(Base):\n"
        "    def _write(self, key, payload):\n"
        "        with open(self.path(key), 'wb') as f:\n"
        "            f.write(payload)\n"
        "        return self.path(key)\n",
        ns,
    )
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, {**correct, "DiskTier": ns["DiskTier"]}, step=3, out=io.StringIO())
    assert "torn" in failure.value.report.text


def test_every_rule_the_machines_break_is_in_the_registry() -> None:
    """The ids the machines raise (an ``InvariantViolation``'s, or the rule handed to the
    helpers that raise one) are the keys of ``INVARIANTS``, and so is every hint the grader
    gives a machine's failure: read from the source, so a one-off id cannot slip in."""
    import ast
    import inspect

    from servelab.grading import kv_offload as grader
    from servelab.testing import kv_offload as machines

    raisers = {"InvariantViolation": 0, "_compare": 2, "_close": 3}
    raised = {f"{method}-refused" for method in ("pin", "unpin", "ref", "unref")}
    for node in ast.walk(ast.parse(inspect.getsource(machines))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in raisers:
            position = raisers[node.func.id]  # type: ignore[attr-defined]
            rule = node.args[position] if len(node.args) > position else None
            if isinstance(rule, ast.Constant) and isinstance(rule.value, str):
                raised.add(rule.value)
    assert len(raised) > 15, raised
    assert raised <= set(machines.INVARIANTS), raised - set(machines.INVARIANTS)
    for step in grader.TOPIC.steps:
        assert step.machine is not None
        assert set(step.machine.hints) <= set(machines.INVARIANTS)
