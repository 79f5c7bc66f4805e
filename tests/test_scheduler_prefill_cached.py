"""Every field of a scheduler Prefill is compared: a Prefill whose num_cached is not 0 (a
returning request told to skip a prompt whose KV the preemption freed) is caught at step 3 and
named by its field and expected value; a request re-prefilled at its prompt only is told by its
length, with no word of num_cached."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint, grade
from servelab.grading import GradeFailure
from servelab.kv.scheduler import Prefill, Sequence, StepOutput
from servelab.testing.core import InvariantViolation
from servelab.testing.scheduler_cached import check_prefill_cached

S3 = checkpoint("scheduler", 3)


def _report(impl: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("scheduler", impl, 3, quiet=True)
    return str(failed.value)


class ReturnsWithItsPromptCached(S3):
    """admit tells the engine that a returning request's prompt holds KV."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_tokens
            if not self.fits(n):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            returning = n > seq.prompt_len
            out.prefills.append(Prefill(seq, n, seq.prompt_len if returning else 0))


class ReturnsAtItsPrompt(S3):
    """admit re-prefills a returning request at its prompt only."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting[0]
            n = seq.prompt_len
            if not self.fits(n):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


def test_a_returning_prompt_said_cached_is_named_by_its_field() -> None:
    report = _report(ReturnsWithItsPromptCached)
    assert "num_cached=" in report and "expected num_cached 0" in report, report
    assert "comes back from a preemption by recompute" in report, report
    assert "start at your `admit`" in report, report


def test_a_prompt_only_return_says_nothing_of_num_cached() -> None:
    report = _report(ReturnsAtItsPrompt)
    assert "at its prompt length" in report, report
    assert "expected num_cached" not in report and "Prefill(seq, " not in report, report


def test_a_new_request_said_cached_is_told_it_holds_no_kv() -> None:
    out = StepOutput()
    out.prefills.append(Prefill(Sequence.dummy(4, prompt_len=3, max_new_tokens=2), 3, 2))
    with pytest.raises(InvariantViolation) as failed:
        check_prefill_cached(out, {4: 3}, "sched.step()")
    assert "no token of sequence 4 holds KV yet" in str(failed.value)
    check_prefill_cached(StepOutput(), {}, "sched.step()")
