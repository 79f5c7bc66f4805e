"""Eviction-policy's check hints state the rule each check enforces, never a list of causes
offered as alternatives: a wrong order has many causes, and "tie-break ... Or: a pinned key's
history ..." pointed at code that was right whenever another one was the slip. A probe's own
message labels the counts, ticks and hand moves it derives as the reference's."""

from __future__ import annotations

from buggy_impls import failing_report
from servelab.grading.eviction_policy import TOPIC
from servelab.grading.mistakes.eviction_policy.lfu_hit_no_count import Buggy as HitNoCount
from servelab.grading.mistakes.eviction_policy.sieve_keeps_visited import Buggy as KeepsVisited


def _hints() -> list[str]:
    found = []
    for step in TOPIC.steps:
        found += [str(p.hint) for p in step.probes]
        if step.machine is not None:
            found += [str(h) for h in step.machine.hints.values()]
    return found


def test_no_check_hint_offers_causes_as_alternatives() -> None:
    hints = _hints()
    assert hints
    assert not [h for h in hints if " Or: " in h]
    # the rules, not a cause: a pinned key is no candidate; the sweep is no named variant
    assert not [h for h in hints if "ignore pins" in h or "second chance" in h]


def test_a_probe_labels_the_counts_it_derives_as_the_references() -> None:
    report, _ = failing_report("eviction-policy", HitNoCount, 1)
    assert "in the reference 'b' has count 1" in report.text, report.text


def test_a_probe_labels_the_hand_it_derives_as_the_references() -> None:
    report, _ = failing_report("eviction-policy", KeepsVisited, 4)
    assert "the reference's hand" in report.text, report.text
