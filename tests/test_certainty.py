"""Certainty only when earned, measured on the catalogue with each mistake left out.

A mistake left out of the catalogue stands for one nobody listed: the report may point at its
method and may ask about a look-alike, but it must never say "behaves exactly like" another.
And over the catalogue, the method the report points at is one the mistake changes.
"""

from __future__ import annotations

import pytest

from buggy_impls import failing_report
from servelab.grading.diagnose import HOOKS, Finding
from servelab.grading.localise import changed_methods
from servelab.grading.mistakes import CORRECT, Mistake, correct_impl, mistakes

ALL = [m for topic in CORRECT for m in mistakes(topic)]


_FINDINGS: dict[tuple[str, str], Finding] = {}


def _left_out(m: Mistake) -> Finding:
    """The diagnosis of ``m`` with ``m`` left out of the catalogue (computed once per mistake;
    a policy mistake's impl is a dict, so the mistake itself cannot key a cache)."""
    key = (m.topic, m.name)
    if key not in _FINDINGS:
        _, program = failing_report(m.topic, m.impl)
        others = [x for x in mistakes(m.topic) if x.name != m.name]
        _FINDINGS[key] = HOOKS[m.topic].explain(program, m.impl, None, others)
    return _FINDINGS[key]


@pytest.mark.parametrize("m", ALL, ids=[f"{m.topic}/{m.name}" for m in ALL])
def test_a_mistake_left_out_is_never_named_with_certainty_after_another(m: Mistake) -> None:
    finding = _left_out(m)
    if finding.certain:
        assert finding.hint is not None and m.hint.lower() in finding.hint.lower(), finding.hint


@pytest.mark.parametrize("topic", list(CORRECT))
def test_the_method_found_is_one_the_mistake_changes_in_95_percent(topic: str) -> None:
    correct = correct_impl(topic)
    found = [
        bool(set(_left_out(m).methods) & changed_methods(m.impl, correct)) for m in mistakes(topic)
    ]
    missed = [m.name for m, ok in zip(mistakes(topic), found, strict=True) if not ok]
    assert sum(found) >= 0.95 * len(found), missed
