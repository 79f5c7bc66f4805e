"""A schedule_running that lists a chunk before the extend that raises, or that resets the
asker's computed tokens instead of the victim's, is told so as a copy with extend and the
output watched shows it, graded end to end; look-alikes whose watched copy shows neither get
no such sentence."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint, grade
from servelab.grading import GradeFailure
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

T3 = checkpoint("token-budget", 3)
LISTED = "chunk in out.scheduled before its extend, which then raised OutOfBlocks"
RESET = "the count reset is the asker's, not the victim's"


def _hint(impl: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("token-budget", impl, 3, quiet=True)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _ListsThenExtends(T3):  # type: ignore[misc]
    """Puts the chunk in the output first, then fills its slots in place."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            chunk = Chunk(seq, start, n, [], start + n == seq.num_tokens)
            out.scheduled += [chunk]
            try:
                chunk.slots[:] = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class _ZeroesTheAsker(T3):  # type: ignore[misc]
    """Preempts with the reference's preempt, then sets the asker back to token 0 too, and
    puts the victim's count back as it was."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                had = self.computed[victim.seq_id]
                self.preempt(victim, out)
                self.computed[victim.seq_id] = had
                self.computed[seq.seq_id] = 0
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class _ListsTwiceAfterExtend(T3):  # type: ignore[misc]
    """Extends first, as it should, then lists the chunk twice."""

    def schedule_running(self, out: Any, budget: int) -> int:
        left = super().schedule_running(out, budget)
        if len(out.scheduled) > 1:
            out.scheduled.append(out.scheduled[-1])
        return left


class _TakesBackThenStops(T3):  # type: ignore[misc]
    """Lists the chunk first and takes it back out when extend fails (nothing stays listed),
    then preempts the latest and stops instead of retrying the request whose extend failed."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            chunk = Chunk(seq, start, n, [], start + n == seq.num_tokens)
            out.scheduled.append(chunk)
            try:
                chunk.slots[:] = self.extend(seq, start, n)
            except OutOfBlocks:
                out.scheduled.remove(chunk)
                self.preempt(self.running.pop(), out)
                return budget
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class _NoRoomOfItsOwn(OutOfBlocks):
    """An OutOfBlocks of the learner's own: still the documented error."""


class _ListsThenExtendsOwnError(_ListsThenExtends):
    """Lists before extend, as _ListsThenExtends, with extend raising a subclass of
    OutOfBlocks."""

    def extend(self, seq: Any, start: int, n: int) -> Any:
        try:
            return super().extend(seq, start, n)
        except OutOfBlocks as e:
            raise _NoRoomOfItsOwn(str(e)) from None


def test_a_chunk_listed_before_its_extend_is_named() -> None:
    hint = _hint(_ListsThenExtends)
    assert LISTED in hint
    assert "yours listed it again" in hint


def test_the_asker_reset_instead_of_the_victim_is_named() -> None:
    hint = _hint(_ZeroesTheAsker)
    assert RESET in hint
    assert "from 2 to 0" in hint


def test_a_chunk_listed_twice_after_its_extend_is_not_put_on_the_extend() -> None:
    hint = _hint(_ListsTwiceAfterExtend)
    assert LISTED not in hint
    assert RESET not in hint


def test_a_chunk_taken_back_out_after_its_extend_failed_is_not_said_to_stay_listed() -> None:
    hint = _hint(_TakesBackThenStops)
    assert LISTED not in hint and "stayed listed" not in hint
    assert "is retried" in hint


def test_an_out_of_blocks_of_the_learners_own_class_is_read_as_one() -> None:
    hint = _hint(_ListsThenExtendsOwnError)
    assert LISTED in hint
