"""Scheduler reports proven on copies or read from the call that raised: a fit against the
pool's size, a head taken out of waiting before an allocation that raised, an index past the
end of running once a victim was popped, victims queued by id, a step's finished listed by
id, a finished sequence's place filled with the last running one. Each shown on a real slip
graded end to end, and kept back on a look-alike."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint, grade
from servelab.grading import GradeFailure
from servelab.grading.readings.difference import SAME, Difference
from servelab.grading.readings.scheduler_retired import moved_the_last_in
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode, Prefill

S1, S2, S3 = (checkpoint("scheduler", i) for i in (1, 2, 3))


class FitsThePool(S1):
    """Counts the pool's size, not its free blocks."""

    def fits(self, n_tokens):
        return self.bm.num_blocks - self.blocks_needed(n_tokens) >= self.watermark


class FitsWithoutWatermark(S1):
    """Admits while the request fits at all."""

    def fits(self, n_tokens):
        return self.bm.num_free - self.blocks_needed(n_tokens) >= 0


class AllocatesBeforeAsking(S1):
    """Takes the head, allocates, then checks the watermark: OutOfBlocks escapes with the
    head already out of waiting."""

    def admit(self, out):
        while self.waiting:
            seq = self.waiting.popleft()
            n = seq.num_tokens
            self.bm.allocate(seq.seq_id, n)
            if self.bm.num_free < self.watermark:
                self.bm.free_seq(seq.seq_id)
                self.waiting.appendleft(seq)
                break
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class AllocatesTheHeadInPlace(S1):
    """Allocates the head before taking it out of waiting, asking nothing first: OutOfBlocks
    escapes with the head still waiting."""

    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_tokens
            self.bm.allocate(seq.seq_id, n)
            if self.bm.num_free < self.watermark:
                self.bm.free_seq(seq.seq_id)
                break
            self.waiting.popleft()
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class DecodeOverFixedRange(S3):
    """Walks range(len(running)) taken before any victim is popped."""

    def decode(self, out):
        for i in range(len(self.running)):
            seq = self.running[i]
            slot = None
            while slot is None:
                try:
                    slot = self.bm.append_slot(seq.seq_id)
                except OutOfBlocks:
                    victim = self.running.pop()
                    self.preempt(victim, out)
                    if victim is seq:
                        return
            out.decodes.append(Decode(seq, slot))


class DecodePopsWaiting(S3):
    """Takes its victim from the back of waiting instead of running."""

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.waiting.pop()
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class RequeueById(S3):
    """Puts a victim back into waiting at its place by seq id."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        items = sorted([victim, *self.waiting], key=lambda s: s.seq_id)
        self.waiting.clear()
        self.waiting.extend(items)
        out.preempted.append(victim)


class RequeueAtBack(S3):
    """Puts a victim at the back of waiting."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.append(victim)
        out.preempted.append(victim)


class PreemptDropsVictim(S3):
    """Frees and reports the victim but never queues it again."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        out.preempted.append(victim)


class RetireById(S2):
    """Retires in order of seq id."""

    def retire(self, out):
        for seq in sorted(self.running, key=lambda s: s.seq_id):
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
        self.running = [s for s in self.running if not s.is_finished]


class RetireBySwap(S2):
    """Fills a finished sequence's place with the last running one."""

    def retire(self, out):
        i = 0
        while i < len(self.running):
            if self.running[i].is_finished:
                self.bm.free_seq(self.running[i].seq_id)
                out.finished.append(self.running[i])
                last = self.running.pop()
                if i < len(self.running):
                    self.running[i] = last
            else:
                i += 1


class RetireReversed(S2):
    """Once one finishes, keeps the unfinished sequences newest first."""

    def retire(self, out):
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
        rest = [s for s in self.running if not s.is_finished]
        self.running = rest[::-1] if out.finished else rest


def _words(impl: Any, step: int) -> str:
    """The report, outside the program it reproduces."""
    with pytest.raises(GradeFailure) as failed:
        grade("scheduler", impl, step, quiet=True)
    return "\n".join(line for line in str(failed.value).splitlines() if "Sequence." not in line)


POOL = "yours counts the pool's size (bm.num_blocks)"
TAKEN = "leaving it in neither waiting nor running"
PAST = "indexed running past its end"
BY_ID = "in order of seq_id"
SWAP = "sequence 3 was moved from the end of running into finished sequence 0's place"

# slip, step, what the report must say, what it must not say
CASES = {
    "fits against the pool": (FitsThePool, 1, POOL, "num_free - needed >= 0"),
    "fits without the watermark": (FitsWithoutWatermark, 1, "watermark", POOL),
    "a head taken, then a raise": (AllocatesBeforeAsking, 1, TAKEN, "This check was written"),
    "a raise with the head waiting": (AllocatesTheHeadInPlace, 1, "OutOfBlocks", TAKEN),
    "an index past running": (DecodeOverFixedRange, 3, PAST, "This check was written"),
    "a victim from waiting": (DecodePopsWaiting, 3, "your `decode`", PAST),
    "victims queued by id": (RequeueById, 3, BY_ID, "at the back"),
    "a victim at the back": (RequeueAtBack, 3, "front of waiting", BY_ID),
    "a victim dropped": (PreemptDropsVictim, 3, "it is in neither running nor waiting", BY_ID),
    "finished listed by id": (RetireById, 2, "listed this step's finished sequences", BY_ID),
    "a finished one's place filled with the last": (RetireBySwap, 2, SWAP, "[3, 2, 1]"),
    "the rest reversed": (RetireReversed, 2, "yours left running as [3, 2, 1]", "swap"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_proven_reading_shows_where_it_holds_and_only_there(case: str) -> None:
    impl, step, says, never = CASES[case]
    text = _words(impl, step)
    assert says in text, text
    assert never not in text, text


def test_the_reference_lists_finished_sequences_in_running_order() -> None:
    grade("scheduler", S2, 2, quiet=True)


def _retired(before: list[int], mine: list[int], theirs: list[int]) -> Difference:
    def shown(ids: list[int]) -> dict[str, Any]:
        return {"running": [(s, 6) for s in ids]}

    return Difference("retire", "", (), shown(before), shown(mine), shown(theirs), SAME, SAME, None)


def test_a_swap_that_reads_as_a_reversal_is_not_named() -> None:
    # one sequence beside the one moved: [2, 1] is the swap and the reversal alike
    assert moved_the_last_in(_retired([0, 1, 2], [2, 1], [1, 2])) is None
    said = moved_the_last_in(_retired([0, 1, 2, 3], [3, 1, 2], [1, 2, 3]))
    assert said is not None and "sequence 3 was moved" in said
    assert moved_the_last_in(_retired([0, 1, 2, 3], [3, 2, 1], [1, 2, 3])) is None
