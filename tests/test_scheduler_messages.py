"""A scheduler check's own message and hint say only what is true of the learner's run: the
reference's arithmetic is labelled as the reference's, and a check's rule is shown only where
what the learner's code did breaks it. Each slip below once read a rule it keeps, or a sum of
the reference's told as if it were its own; graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode, Prefill, RequestTooLarge

TOPIC = "scheduler"
Admitting = checkpoint(TOPIC, 1)
Final = checkpoint(TOPIC, 3)


class AddQueuesAtFront(Admitting):
    """add() queues with appendleft: the newest request is the next to admit."""

    def add(self, seq: Any) -> None:
        if self.blocks_needed(seq.prompt_len + seq.max_new_tokens) > (
            self.bm.num_blocks - self.watermark
        ):
            raise RequestTooLarge("too large")
        self.waiting.appendleft(seq)


class AdmitFromTheBack(Admitting):
    """admit() takes the newest waiting request first (waiting[-1], pop())."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[-1].num_tokens):
            seq = self.waiting.pop()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class AdmitAllocatesNextSlot(Admitting):
    """admit() allocates a slot more than it prefills (room for the first decode)."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens + 1)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class AdmitLeavesOneWaiting(Admitting):
    """admit() loops while more than one request waits: the last is never admitted."""

    def admit(self, out: Any) -> None:
        while len(self.waiting) > 1 and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class DecodeBreaksAfterPreempt(Final):
    """decode() stops for the step once it has preempted: the asker never retries."""

    def decode(self, out: Any) -> None:
        for seq in list(self.running):
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.preempt(self.running.pop(), out)
                break
            out.decodes.append(Decode(seq, slot))


class PreemptOverwritesList(Final):
    """preempt() sets out.preempted = [victim]: only a step's last victim is reported."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)
        out.preempted = [victim]


class FitsRefusesOverHalfPool(Admitting):
    """fits() refuses a request needing more than half the pool, to keep room for decodes."""

    def fits(self, n_tokens: int) -> bool:
        need = self.blocks_needed(n_tokens)
        return need <= self.bm.num_blocks // 2 and self.bm.num_free - need >= self.watermark


class VictimCoolsDownAStep(Final):
    """A sequence preempted in a step waits a whole step more before admission takes it."""

    def preempt(self, victim: Any, out: Any) -> None:
        super().preempt(victim, out)
        self.cool = {**getattr(self, "cool", {}), victim.seq_id: 2}

    def admit(self, out: Any) -> None:
        cool = getattr(self, "cool", {})
        while self.waiting and not cool.get(self.waiting[0].seq_id):
            if not self.fits(self.waiting[0].num_tokens):
                break
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))
        self.cool = {k: v - 1 for k, v in cool.items() if v > 1}


class PrefillsAtTheFront(Admitting):
    """admit() admits first come, first served, but lists each prefill at the front of
    out.prefills: the output names the newest first, running holds them in arrival order."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.insert(0, Prefill(seq, seq.num_tokens))


class ListsTheHeadOnly(Admitting):
    """admit() admits every request that fits but lists only the step's first in out.prefills."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            if not out.prefills:
                out.prefills.append(Prefill(seq, seq.num_tokens))


class ListsTheVictimOnly(Final):
    """decode() lists the newest running sequence in out.preempted on OutOfBlocks and stops,
    never calling preempt: nobody leaves running, nothing is freed."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                out.preempted.append(self.running[-1])
                break
            out.decodes.append(Decode(seq, slot))


class AdmitDropsARefusedHead(Admitting):
    """admit() pops the head before asking fits, for its tokens and its first decode's: a
    refused head is dropped, in neither queue."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting.popleft()
            if not self.fits(seq.num_tokens + 1):
                break
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class AdmitRunsBeforeAsking(Admitting):
    """admit() moves the head to running before asking fits (for its tokens and its first
    decode's): a refused head stays in running with no blocks and no prefill."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting.popleft()
            self.running.append(seq)
            if not self.fits(seq.num_tokens + 1):
                break
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            out.prefills.append(Prefill(seq, seq.num_tokens))


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step, quiet=True)
    return str(failed.value)


# slip, step, what the report must say, what it must no longer say
CASES = {
    "queued at the front": (
        AddQueuesAtFront,
        1,
        ["yours admitted sequence 3 while sequence 0, added before it, was not admitted"],
        ["so it fits, yet was left waiting", "goes on taking the head"],
    ),
    "admitted from the back": (
        AdmitFromTheBack,
        1,
        ["yours admitted sequence 3 while sequence 0", "yours admits the newest waiting"],
        ["so it fits, yet was left waiting", "goes on taking the head", "may overtake"],
    ),
    "allocates a slot more": (
        AdmitAllocatesNextSlot,
        1,
        ["yours has 1 block free after admitting [0, 1], the reference 3", "your `admit`"],
        ["so it fits, yet was left waiting", "This check was written for"],
    ),
    "leaves one waiting": (
        AdmitLeavesOneWaiting,
        1,
        ["in the reference sequence 0 needs 2 blocks of the 8 free", "goes on taking the head"],
        ["a prefill covers every token"],
    ),
    "no retry after the victim": (
        DecodeBreaksAfterPreempt,
        3,
        [
            "yours preempted sequence 1, as the reference does",
            "retry the decode of the sequence whose",
        ],
        ["not the one whose append_slot failed"],
    ),
    "victims overwritten": (
        PreemptOverwritesList,
        3,
        ["your `preempt`", "`out.preempted`"],
        ["not the one whose append_slot failed", "This check was written for"],
    ),
    "refuses a large head": (
        FitsRefusesOverHalfPool,
        1,
        ["admitted is [], expected [0]: in the reference sequence 0 takes 5", "your `fits`"],
        ["must not overtake"],
    ),
    "victim held back": (
        VictimCoolsDownAStep,
        3,
        [
            "in the reference sequence 0 finishes and frees its 2 blocks",
            "on a copy without self.cool, your admit takes request 1",
        ],
        ["re-queued length = prompt + generated", "goes on taking the head"],
    ),
    # out.prefills and the queues disagree: the message says so, not a story built on the list
    "prefills listed newest first": (
        PrefillsAtTheFront,
        1,
        ["yours admitted [0, 1, 2], as the reference does", "yet lists [2, 1, 0] in out.prefills"],
        ["ahead of sequence", "admits in arrival order", "nobody behind it may overtake"],
    ),
    "the head listed alone": (
        ListsTheHeadOnly,
        1,
        ["yours admitted [0, 1, 2], as the reference does", "yet lists [0] in out.prefills"],
        ["after admitting [0]", "the reference 4"],
    ),
    "a victim listed, never preempted": (
        ListsTheVictimOnly,
        3,
        ["out.preempted lists sequence 1, as the reference's does, yet yours left running [0, 1]"],
        ["yours preempted sequence 1", "retry the decode of the sequence whose"],
    ),
    # the watermark probe's request that yours did not admit: where it is, not "waiting"
    "a refused head dropped": (
        AdmitDropsARefusedHead,
        1,
        ["sequence 2 is in neither running [0, 1] nor waiting [3]", "yours did not admit"],
        ["left it waiting", "yours left sequence 2 waiting"],
    ),
    "a refused head running with no blocks": (
        AdmitRunsBeforeAsking,
        1,
        ["yours put [2] in running with no blocks (running [0, 1, 2], waiting [3])"],
        ["as the reference does", "left it waiting"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_checks_message_and_hint_say_only_what_the_run_shows(case: str) -> None:
    impl, step, says, never = CASES[case]
    text = _report(impl, step)
    for part in says:
        assert part in text, text
    for part in never:
        assert part not in text, text
