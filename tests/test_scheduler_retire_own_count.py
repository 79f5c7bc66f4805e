"""A retire that decides from a count of its own, one short of the tokens a sequence generated,
is told so, proven on copies (max_new_tokens one lower: retired; one more token in the
sequence: still kept); a retire that reads the sequence's own count one past its end is not."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.readings.difference import Difference
from servelab.grading.readings.scheduler_late import retired_by_own_count
from servelab.kv.blocks import BlockManager
from servelab.kv.scheduler import Decode, Sequence, StepOutput

Decoding = checkpoint("scheduler", 2)
OWN = "yours decides from a count of its own, not the sequence's tokens"


def _hint(impl: Any) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("scheduler", impl, 2)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _CountsItsDecodes(Decoding):  # type: ignore[misc]
    """Counts the decodes each sequence was given and retires it after max_new_tokens of them."""

    def _given(self) -> dict[int, int]:
        if not hasattr(self, "given"):
            self.given: dict[int, int] = {}
        return self.given

    def decode(self, out: Any) -> None:
        for seq in self.running:
            out.decodes.append(Decode(seq, self.bm.append_slot(seq.seq_id)))
            self._given()[seq.seq_id] = self._given().get(seq.seq_id, 0) + 1

    def retire(self, out: Any) -> None:
        kept = []
        for seq in self.running:
            if self._given().get(seq.seq_id, 0) == seq.max_new_tokens:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            else:
                kept.append(seq)
        self.running = kept


class _ComparesPastTheEnd(Decoding):  # type: ignore[misc]
    """Reads the sequence's own count but retires it only once past max_new_tokens."""

    def retire(self, out: Any) -> None:
        kept = []
        for seq in self.running:
            if seq.num_generated > seq.max_new_tokens:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            else:
                kept.append(seq)
        self.running = kept


def test_a_retire_by_its_own_count_one_short_is_named() -> None:
    hint = _hint(_CountsItsDecodes)
    assert OWN in hint
    assert "with max_new_tokens one lower (1) yours retires it" in hint


def test_a_retire_reading_the_sequence_one_past_its_end_is_not_put_on_its_own_count() -> None:
    assert OWN not in _hint(_ComparesPastTheEnd)


def test_two_sequences_kept_by_its_own_count_are_told_in_the_plural() -> None:
    sched = _CountsItsDecodes(BlockManager(16, 2))
    sched.add(Sequence.from_prompt(0, [1, 2], 2))
    sched.add(Sequence.from_prompt(1, [3, 4, 5], 2))
    for _ in range(2):  # admitted, then one decode each: two tokens generated, one decode counted
        sched.step()
        for seq in sched.running:
            seq.append_token(7)
    d = Difference("retire", "", (StepOutput(),), {}, {}, {}, "", "", sched)
    said = retired_by_own_count(d, [0, 1]) or ""
    assert said.startswith("yours kept sequences [0, 1] running though each has generated"), said
    assert "yours retires them" in said and "yours still keeps them" in said, said
    assert " it has generated" not in said and "retires it," not in said, said
