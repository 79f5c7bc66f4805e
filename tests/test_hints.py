"""A hint written for one rule is shown only when that rule failed.

A check's hint describes the mistake the check was written for; shown on a failure of another
rule it describes a different mistake, and the learner edits code that was right.
"""

from __future__ import annotations

from dataclasses import replace

from buggy_impls import failing_report
from servelab.grading import load_topic
from servelab.grading.eviction_policy import HINTS as POLICY_HINTS
from servelab.grading.mistakes import mistakes
from servelab.grading.prefix_cache import HINTS as PREFIX_HINTS


def _check_hint(topic: str, name: str) -> str:
    """The failed check's own hint for catalogue mistake ``name``, diagnosis switched off."""
    mistake = next(m for m in mistakes(topic) if m.name == name)
    undiagnosed = replace(load_topic(topic), diagnose=lambda program, impl: None)
    report, _ = failing_report(undiagnosed, mistake.impl)
    return report.hint


def test_the_prefix_lookup_hint_belongs_to_lookup_probes_only() -> None:
    for step in load_topic("prefix-cache").steps:
        for probe in step.probes:
            if probe.hint == PREFIX_HINTS["hit-count"]:
                assert "lookup" in probe.name, (step.number, probe.name)


def test_a_block_filled_by_decoding_gets_the_decoding_hint() -> None:
    hint = _check_hint("prefix-cache", "decode_never_cached")
    assert "decoding fills a block" in hint
    assert hint != PREFIX_HINTS["hit-count"]


def test_every_candidate_count_hint_speaks_of_len() -> None:
    for step in load_topic("eviction-policy").steps:
        if step.machine is None:
            continue
        for invariant, hint in step.machine.hints.items():
            if invariant.endswith("candidate-count"):
                assert "len" in hint, (step.number, invariant, hint)
                assert POLICY_HINTS["counts"] not in hint, (step.number, invariant)


def test_a_len_that_counts_pinned_keys_is_not_told_about_counts() -> None:
    hint = _check_hint("eviction-policy", "lfu_len_counts_pinned")
    assert "len" in hint and POLICY_HINTS["counts"] not in hint, hint
