"""Scheduler readings proven by re-runs: an admit that takes the newest waiting request, a
decode that skips the sequence whose append found no free block, a retry after the asker was
itself the victim, a victim listed among the decodes (its own victim, or a sequence served
while an older asker waited for its retry), a fits that keeps the watermark only
while something runs. Each slip is graded end to end, and a look-alike next to it must not get
the sentence. A scheduler's own StepFailed never reaches a report: the grader runs your
scheduler, and your step's error is the one shown."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from buggy_impls import failing_check, failing_report, shown_hint
from servelab import checkpoint
from servelab.grading import load_topic
from servelab.grading.diagnose import explained
from servelab.grading.mistakes import mistakes
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode, Prefill

TOPIC = "scheduler"
Admitting = checkpoint(TOPIC, 1)
Decoding = checkpoint(TOPIC, 2)
Final = checkpoint(TOPIC, 3)

NEWEST_FIRST = "yours admits the newest waiting request first"
SKIPPED = "yours skipped sequence 1: its bm.append_slot raised OutOfBlocks"
OWN_VICTIM = "when the sequence asking is itself the victim, stop retrying"
DECODED_VICTIM = "also preempted it in this call"
SELF_VICTIM = "a sequence that is itself the victim gets no Decode"
SERVED_FIRST = "was still waiting for its retry"
IDLE = "True with nothing running, and False from the same free blocks once one sequence runs"


def _text(impl: Any, step: int) -> str:
    return failing_report(TOPIC, impl, step)[0].text


class AdmitHeadThenPop(Admitting):  # type: ignore[misc,valid-type]
    """Asks whether the head fits, then takes `waiting.pop()`: the newest."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.pop()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class AdmitBackAtStep3(Final):  # type: ignore[misc,valid-type]
    """Admits from the back of waiting, where step 3 also puts its victims at the front."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[-1].num_tokens):
            seq = self.waiting.pop()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class AdmitIntoRunningFront(Admitting):  # type: ignore[misc,valid-type]
    """Takes the oldest first, but puts it at the front of running: not the newest first."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.insert(0, seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


@pytest.mark.parametrize(("impl", "step"), [(AdmitHeadThenPop, 1), (AdmitBackAtStep3, 3)])
def test_an_admit_from_the_back_is_named(impl: Any, step: int) -> None:
    text = _text(impl, step)
    assert NEWEST_FIRST in text
    assert "popleft()" in text
    assert "nobody behind it may overtake" not in text


def test_an_admit_that_only_reorders_running_is_not_called_newest_first() -> None:
    assert NEWEST_FIRST not in _text(AdmitIntoRunningFront, 1)


class SkipAFullDecode(Final):  # type: ignore[misc,valid-type]
    """On OutOfBlocks, skips the sequence for the step: nobody is preempted."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                continue
            out.decodes.append(Decode(seq, slot))


class SkipAfterOneVictim(Final):  # type: ignore[misc,valid-type]
    """Preempts once per step; a second failed append is skipped."""

    def decode(self, out: Any) -> None:
        i, preempted = 0, False
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                if preempted:
                    i += 1
                    continue
                preempted = True
                self.preempt(self.running.pop(), out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


def test_a_skipped_decode_is_named_at_step_3() -> None:
    text = _text(SkipAFullDecode, 3)
    assert SKIPPED in text
    assert "preempt the newest running sequence (running.pop()) and retry" in text
    assert "the step-3 one preempts" in text


def test_a_skipped_decode_at_step_2_is_told_to_raise() -> None:
    class SkipAtStep2(Decoding):  # type: ignore[misc,valid-type]
        decode = SkipAFullDecode.decode

    text = _text(SkipAtStep2, 2)
    assert SKIPPED in text
    assert "let OutOfBlocks from bm.append_slot reach the caller" in text
    assert "its result differs from the reference's" not in text


def test_a_decode_that_preempted_is_not_said_to_skip() -> None:
    assert "yours skipped sequence" not in _text(SkipAfterOneVictim, 3)


class ForRetryOnce(Final):  # type: ignore[misc,valid-type]
    """Walks running itself; after a preemption retries the append once, even for itself."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.preempt(self.running.pop(), out)
                slot = self.bm.append_slot(seq.seq_id)
            out.decodes.append(Decode(seq, slot))


class OverACopy(Final):  # type: ignore[misc,valid-type]
    """Walks a copy of running: a victim taken out of it is still visited later."""

    def decode(self, out: Any) -> None:
        for seq in list(self.running):
            while True:
                try:
                    slot = self.bm.append_slot(seq.seq_id)
                    out.decodes.append(Decode(seq, slot))
                    break
                except OutOfBlocks:
                    victim = self.running.pop()
                    self.preempt(victim, out)
                    if victim is seq:
                        break


def test_a_retry_for_its_own_victim_is_named_not_put_on_a_copy() -> None:
    text = _text(ForRetryOnce, 3)
    assert OWN_VICTIM in text
    assert "A loop over a copy of running" not in text


def test_a_loop_over_a_copy_keeps_its_own_sentence() -> None:
    text = _text(OverACopy, 3)
    assert OWN_VICTIM not in text
    assert "A loop over a copy of running" in text


class DecodesItsVictim(Final):  # type: ignore[misc,valid-type]
    """Retries until a block or itself is the victim, then lists a Decode either way."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            slot = None
            while True:
                try:
                    slot = self.bm.append_slot(seq.seq_id)
                    break
                except OutOfBlocks:
                    victim = self.running.pop()
                    self.preempt(victim, out)
                    if victim is seq:
                        break
            out.decodes.append(Decode(seq, slot))


class DecodesTwice(Final):  # type: ignore[misc,valid-type]
    """Lists each decode twice: nobody preempted is listed."""

    def decode(self, out: Any) -> None:
        super().decode(out)
        out.decodes.extend(list(out.decodes))


def test_a_victim_listed_among_the_decodes_is_named() -> None:
    text = _text(DecodesItsVictim, 3)
    assert DECODED_VICTIM in text
    assert SELF_VICTIM in text
    assert SERVED_FIRST not in text


class AskerSentToTheBack(Final):  # type: ignore[misc,valid-type]
    """An asker that freed another's blocks goes to the end of the walk: the sequences behind
    it are served first, and its retry may take one of them, already decoded, as victim."""

    def decode(self, out: Any) -> None:
        pending = list(self.running)
        while pending:
            seq = pending.pop(0)
            if seq not in self.running:
                continue
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is not seq:
                    pending.append(seq)
                continue
            out.decodes.append(Decode(seq, slot))


def test_a_retry_put_off_past_the_others_is_named_not_called_a_self_victim() -> None:
    """Sequence 0's own append succeeded: it was served while older sequence 1 waited for
    its retry, and 1's retry then preempted it. It was never its own victim."""
    text = _text(AskerSentToTheBack, 3)
    assert (
        "yours served sequence 0 (its bm.append_slot succeeded and it got a Decode) while "
        "older sequence 1 was still waiting for its retry: 1's bm.append_slot had found no "
        "free block and yours then preempted sequence 3; 1's later retry preempted 0"
    ) in text
    assert "yours decoded [0, 1] where running, oldest first, was [1, 0, 3]" in text
    assert "asks again at once, before any newer sequence is served" in text
    assert SELF_VICTIM not in text
    assert DECODED_VICTIM not in text


def test_decodes_listed_twice_are_not_called_a_decoded_victim() -> None:
    assert DECODED_VICTIM not in _text(DecodesTwice, 3)


def test_another_victim_is_told_by_the_victim_rule_not_as_a_decoded_victim() -> None:
    """The catalogue's highest-id victim, with its own entry left out: the sequence it takes
    was decoded earlier in the call, and the victim rule, not the decoded-victim sentence,
    tells it."""
    listed = {m.name: m for m in mistakes(TOPIC)}
    victim = listed["victim_highest_id"]
    undiagnosed = replace(load_topic(TOPIC), diagnose=lambda program, impl: None)
    report, program, exc = failing_check(undiagnosed, victim.impl)
    others = [m for m in listed.values() if m.name != victim.name]
    said = shown_hint(explained(TOPIC, program, exc, victim.impl, None, others), report)
    assert DECODED_VICTIM not in said
    assert "yours preempted sequence" in said


class WatermarkOnlyWhileRunning(Admitting):  # type: ignore[misc,valid-type]
    """With nothing running, admits whatever fits the pool, watermark or not."""

    def fits(self, n_tokens: int) -> bool:
        if not self.running:
            return bool(self.bm.num_free >= self.blocks_needed(n_tokens))
        return bool(self.bm.num_free - self.blocks_needed(n_tokens) >= self.watermark)


class NoWatermark(Admitting):  # type: ignore[misc,valid-type]
    """Ignores the watermark always."""

    def fits(self, n_tokens: int) -> bool:
        return bool(self.bm.num_free >= self.blocks_needed(n_tokens))


def test_a_watermark_kept_only_while_running_is_named() -> None:
    assert IDLE in _text(WatermarkOnlyWhileRunning, 1)


def test_a_watermark_never_kept_is_not_put_on_running() -> None:
    assert IDLE not in _text(NoWatermark, 1)


def test_a_step_that_raises_shows_the_learners_error_not_step_failed() -> None:
    """The grader runs your scheduler, never the package's: StepFailed, which the package's
    Scheduler.step raises around a block manager's error, cannot reach a report."""

    class DecodeWithoutCatch(Final):  # type: ignore[misc,valid-type]
        decode = Decoding.decode

    text = _text(DecodeWithoutCatch, 3)
    assert "OutOfBlocks: sequence 0 needs a new block" in text
    assert "StepFailed" not in text
