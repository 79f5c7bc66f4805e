"""Scheduler admissions decided on an older picture, each proven by a re-run on a copy: a free
count read before the first allocation and not again, and an attribute kept from an earlier
step that stops admission. Each slip is graded end to end, and a look-alike next to it must
not get the sentence."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.scheduler import Prefill

TOPIC = "scheduler"
Admitting = checkpoint(TOPIC, 1)
Final = checkpoint(TOPIC, 3)

READ_ONCE = "your admit read bm.num_free once, before its first allocation"
KEPT = "stops admission here"


def _text(impl: Any, step: int) -> str:
    return failing_report(TOPIC, impl, step)[0].text


class LeftCountedOnce(Admitting):  # type: ignore[misc,valid-type]
    """Keeps the free count from the start of the call and never takes the admitted off it."""

    def admit(self, out: Any) -> None:
        left = self.bm.num_free
        while self.waiting:
            seq = self.waiting[0]
            if left - self.blocks_needed(seq.num_tokens) < self.watermark:
                break
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(self.waiting.popleft())
            out.prefills.append(Prefill(seq, seq.num_tokens))


class NoWatermarkAtAdmit(Admitting):  # type: ignore[misc,valid-type]
    """Reads the free count for every request, and forgets the watermark."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting[0]
            if self.bm.num_free < self.blocks_needed(seq.num_tokens):
                break
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(self.waiting.popleft())
            out.prefills.append(Prefill(seq, seq.num_tokens))


class PausedAfterAVictim(Final):  # type: ignore[misc,valid-type]
    """Marks the scheduler paused at its first preemption and admits nobody after that."""

    def decode(self, out: Any) -> None:
        before = len(out.preempted)
        super().decode(out)
        if len(out.preempted) > before:
            self.paused = True

    def admit(self, out: Any) -> None:
        if getattr(self, "paused", False):
            return
        super().admit(out)


class CountsCallsOneAtATime(Final):  # type: ignore[misc,valid-type]
    """Keeps a count of its admit calls (harmless) and admits one request per call."""

    def admit(self, out: Any) -> None:
        self.calls = getattr(self, "calls", 0) + 1
        if self.waiting and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


def test_a_free_count_read_once_is_named() -> None:
    text = _text(LeftCountedOnce, 1)
    assert READ_ONCE in text
    assert "fits(seq.num_tokens) reads bm.num_free anew" in text


def test_a_free_count_read_for_each_request_is_not_called_read_once() -> None:
    assert "read bm.num_free" not in _text(NoWatermarkAtAdmit, 1)


def test_an_attribute_that_stops_admission_is_named() -> None:
    text = _text(PausedAfterAVictim, 3)
    assert "your scheduler holds self.paused = True from before this call" in text
    assert "on a copy without self.paused, your admit takes request" in text
    assert KEPT in text


def test_a_harmless_attribute_is_not_blamed() -> None:
    text = _text(CountsCallsOneAtATime, 1)
    assert KEPT not in text
    assert "self.calls" not in text
