"""A failing kv-offload grade stays quick: a wait that never ends is reported hung after the
wait probes' own second of CPU, not the grader's default three."""

from __future__ import annotations

from buggy_impls import failing_report
from servelab.grading.kv_offload import WAIT_SECONDS
from servelab.grading.mistakes.kv_offload import busy_wait_forever


def test_a_wait_that_never_ends_is_reported_after_the_wait_probes_second() -> None:
    assert WAIT_SECONDS == 1.0
    report = failing_report("kv-offload", busy_wait_forever.Buggy, 2)[0].text
    assert "✗ step 2 · the busy wait has an end" in report
    assert "`tier.put('c', payload('c', 30), wait=3)` did not return within 1 s" in report
