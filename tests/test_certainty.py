"""Certainty only when earned, measured on the catalogue with each mistake left out.

A mistake left out of the catalogue stands for one nobody listed: the report may point at its
method and may ask about a look-alike, but it must never say "behaves exactly like" another.
And over the catalogue, the method the report points at is one the mistake changes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from buggy_impls import failing_report, shown_hint
from servelab.grading import load_topic
from servelab.grading.diagnose import HOOKS, Finding
from servelab.grading.localise import changed_methods
from servelab.grading.mistakes import CORRECT, Mistake, correct_impl, mistakes
from servelab.grading.readings import reading

ALL = [m for topic in CORRECT for m in mistakes(topic)]


_FINDINGS: dict[tuple[str, str], tuple[Finding, str]] = {}


def _graded(m: Mistake) -> tuple[Finding, str]:
    """The diagnosis of ``m`` with ``m`` left out of the catalogue, and the hint the report
    shows then (computed once per mistake; a policy mistake's impl is a dict, so the mistake
    itself cannot key a cache). The failed check's own hint comes from a grade without
    diagnosis, as for a mistake nobody listed."""
    key = (m.topic, m.name)
    if key not in _FINDINGS:
        undiagnosed = replace(load_topic(m.topic), diagnose=lambda program, impl: None)
        report, program = failing_report(undiagnosed, m.impl)
        others = [x for x in mistakes(m.topic) if x.name != m.name]
        finding = HOOKS[m.topic].explain(program, m.impl, None, others)
        _FINDINGS[key] = (finding, shown_hint(finding, report))
    return _FINDINGS[key]


def _left_out(m: Mistake) -> Finding:
    return _graded(m)[0]


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


def test_a_mistake_left_out_is_still_named_in_three_cases_of_four() -> None:
    # Left out of the catalogue, a mistake is named by the reading of its first diverging call
    # (the method's rule, from what differed) or by the failed check's own hint.
    named = [m.hint.lower() in _graded(m)[1].lower() for m in ALL]
    missed = [f"{m.topic}/{m.name}" for m, ok in zip(ALL, named, strict=True) if not ok]
    assert sum(named) >= 0.75 * len(ALL), missed


# Mistakes that were named only with themselves in the catalogue, now named when left out by
# the evidence: the hang itself, the reading of the first diverging call, or the rule of the one
# method whose graft fixes the program though no call of it differs where a learner sees.
FROM_EVIDENCE = {
    ("weight-cache", "endless_loop"),
    ("weight-cache", "misses_not_counted"),
    ("eviction-policy", "lfu_ignores_pins"),
    ("eviction-policy", "sieve_ignores_pins"),
    ("eviction-policy", "lfu_unpin_no_push"),
    ("eviction-policy", "sieve_remove_resets_hand"),
    ("prefix-cache", "free_head_first"),
    ("prefix-cache", "claimed_hits_not_counted"),
    ("prefix-cache", "evictable_hit_kept"),
    ("scheduler", "never_retire"),
    ("scheduler", "retire_after_decode"),
    ("scheduler", "victim_highest_id"),
    ("kv-offload", "double_counts"),
    ("kv-offload", "evicts_before_deciding"),
    ("token-budget", "advance_by_budget"),
    ("token-budget", "budget_spent_twice"),
    ("token-budget", "last_chunk_no_sample"),
    ("token-budget", "whole_prompt_blocks"),
}
NAMED = [m for m in ALL if (m.topic, m.name) in FROM_EVIDENCE]


@pytest.mark.parametrize("m", NAMED, ids=[f"{m.topic}/{m.name}" for m in NAMED])
def test_a_mistake_left_out_is_named_from_the_evidence(m: Mistake) -> None:
    finding, said = _graded(m)
    assert m.hint.lower() in said.lower(), said
    assert not finding.certain


# Topics whose readings were written with no keyword of another mistake in their words (the
# older topics' readings share short keywords such as "count" or "pinned" with their rules).
DISTINCT = [m for m in ALL if m.topic in ("kv-offload", "token-budget")]


@pytest.mark.parametrize("m", DISTINCT, ids=[f"{m.topic}/{m.name}" for m in DISTINCT])
def test_a_reading_names_no_other_mistake_of_its_topic(m: Mistake) -> None:
    # a reading states the rule the located call breaks: shown for a mistake left out, it never
    # carries the keyword of a different mistake of the same topic
    rule = (_graded(m)[0].rule or "").lower()
    others = {x.hint.lower() for x in mistakes(m.topic) if x.name != m.name}
    assert not [key for key in others if key in rule and key not in m.hint.lower()], rule


def test_a_reading_of_what_a_method_keeps_inside_is_its_own_methods_alone() -> None:
    # the rule about an LFU's heap is shown for update_on_unpin, never for another method
    reader = HOOKS["eviction-policy"].spec.reader
    assert "back onto the heap" in (reading(reader, None, "", "LFU.update_on_unpin") or "")
    for other in ("LFU.update_on_pin", "SIEVE.update_on_unpin", "LFU.pop_victim"):
        assert reading(reader, None, "", other) is None
    assert reading(HOOKS["scheduler"].spec.reader, None, "", "retire") is None
