"""The "reproduce:" program of a report runs as printed, under the learner's own class names.

Every catalogue mistake, of every topic (none is left out), is graded as a learner's class
would be, under a name of its own (``MyWeightCache``; for a dict of classes ``MyLFU``,
``MyTier``, ...). The report's program must construct that class by that name, run as printed
in a namespace that holds the class under it, and reproduce the failure (one mistake outside
the catalogue too, an LFU victim taken from the wrong end): replayed on the graded class it
behaves differently from the correct implementation (it raises, or shows another value or
state), and every value it prints in a comment (``cache.keys()  # [...]``) is the value that
line gives. Together the mistakes fail at every step of every topic (checked too).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from typing import Any

import pytest

from buggy_impls import failing_report
from pasted import fails_as_printed
from servelab.grading import load_topic
from servelab.grading._script import graded_names
from servelab.grading.diagnose import SPECS
from servelab.grading.mistakes import CORRECT, Mistake, correct_impl, mistakes
from servelab.grading.replay import replay
from servelab.testing.core import ImplementationHung, hang_guard

#: CPU seconds one printed line may run before it counts as the hang the report names.
LINE_S = 2.0


def _lfu_pops_the_most_used() -> Mistake:
    """A step-2 mistake the catalogue does not hold: its step-2 LFU mistakes are all in the
    pins, this one is in the victim itself."""
    policies = correct_impl("eviction-policy")

    class PopsTheMostUsed(policies["LFU"]):  # type: ignore[misc, name-defined]
        def pop_victim(self) -> Any:
            order = list(self.eviction_order())
            if not order:
                raise LookupError("every key is pinned")
            self.update_on_remove(order[-1])
            return order[-1]

    impl = {"LFU": PopsTheMostUsed, "SIEVE": policies["SIEVE"]}
    return Mistake("eviction-policy", "pops_the_most_used", impl, "", "", "")


CATALOGUE = [m for topic in CORRECT for m in mistakes(topic)] + [_lfu_pops_the_most_used()]
_BY_NAME = {(m.topic, m.name): m for m in CATALOGUE}
_STEP = re.compile(r"^  ✗ step (\d+) ")


def as_learners(impl: Any) -> Any:
    """``impl`` under names of the learner's choosing: each class subclassed as ``My<name>``."""
    if isinstance(impl, Mapping):
        return {key: type(f"My{key}", (cls,), {}) for key, cls in impl.items()}
    return type(f"My{impl.__name__}", (impl,), {})


@cache
def _graded(topic: str, name: str) -> tuple[Any, str, int]:
    m = _BY_NAME[topic, name]
    learner = as_learners(m.impl)
    report, _ = failing_report(m.topic, learner)
    steps = [int(match.group(1)) for line in report.lines if (match := _STEP.match(line))]
    assert steps, report.text
    return learner, report.code, steps[0]


def graded(m: Mistake) -> tuple[Any, str, int]:
    """The learner's class, the report's program, and the step whose check failed."""
    return _graded(m.topic, m.name)


def _namespace(topic: str, learner: Any) -> Any:
    """The topic's namespace for an implementation, its graded classes under ``learner``'s names."""
    spec = SPECS[topic]
    names = graded_names(spec, learner)

    def namespace(impl: Any) -> dict[str, Any]:
        return {names.get(k, k): v for k, v in spec.namespace(impl).items()}

    return namespace


def _run_as_printed(program: str, ns: dict[str, Any]) -> None:
    """Run each line as a learner would paste it, until the graded class raises or hangs; a
    value that a line's comment shows must be the value that line gives."""
    for line in program.splitlines():
        code, _, shown = line.partition("  # ")
        try:
            with hang_guard(code, LINE_S):
                try:
                    compiled = compile(code, "<reproduce>", "eval")
                except SyntaxError:
                    exec(compile(code, "<reproduce>", "exec"), ns)
                    continue
                value = eval(compiled, ns)
        except NameError:
            raise  # a name the program uses and does not define: it cannot be pasted
        except (Exception, ImplementationHung):
            return  # the graded class raised, or never returned: the failure is reproduced
        try:
            expected = ast.literal_eval(shown.strip()) if shown else None
        except (ValueError, SyntaxError):
            continue  # a remark, not a value
        if expected is not None:
            got = list(value) if isinstance(expected, list) else value
            assert got == expected, line


@pytest.mark.parametrize("m", CATALOGUE, ids=lambda m: f"{m.topic}:{m.name}")
def test_the_printed_program_reproduces_the_failure_under_the_learners_names(m: Mistake) -> None:
    learner, program, _ = graded(m)
    assert program, "a failing report shows a program"
    assert re.search(r"(?<![\w.])My\w+\(", program), program  # the learner's class, built
    for usual in SPECS[m.topic].classes:
        assert not re.search(rf"(?<![\w.]){usual}\(", program), program
    namespace = _namespace(m.topic, learner)
    _run_as_printed(program, namespace(learner))
    # and it ends in the line that shows the difference: one raises, or the last line's value
    # is not the reference's (a check that read the state between its calls wrote that read)
    assert fails_as_printed(m.topic, program, learner, correct_impl(m.topic)), program
    spec = replace(SPECS[m.topic], namespace=namespace)
    assert replay(program, spec, learner) != replay(program, spec, correct_impl(m.topic)), program


@pytest.mark.parametrize("topic", list(CORRECT))
def test_the_catalogue_fails_at_every_step(topic: str) -> None:
    failed_at = {graded(m)[2] for m in CATALOGUE if m.topic == topic}
    assert failed_at == {s.number for s in load_topic(topic).steps}
