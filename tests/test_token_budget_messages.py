"""A token-budget check's own message and hint say only what is true of the learner's run:
the reference's arithmetic is labelled as the reference's, and a check's rule is shown only
where what the learner's code did breaks it. Each slip below once read a rule it keeps (or is
the slip a check's rule was written for, which must keep it); graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks, UnknownSequence
from servelab.kv.budget import Chunk

TOPIC = "token-budget"
Budget = checkpoint(TOPIC, 1)
Chunked = checkpoint(TOPIC, 2)
Final = checkpoint(TOPIC, 3)


class RunningNewestFirst(Budget):
    """schedule_running walks running newest first: each still gets its one token."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in reversed(self.running):
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


class RunningTakesTheBudget(Budget):
    """schedule_running gives a running request the whole budget left (the min forgotten)."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = budget
            slots = self.extend(seq, start, seq.num_tokens - start)
            out.scheduled.append(Chunk(seq, start, n, slots, True))
            self.computed[seq.seq_id] = seq.num_tokens
            budget -= n
        return budget


class AdmitNeedsSpareBudget(Budget):
    """admit takes a prompt only while it is shorter than the budget left (< for <=)."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = seq.num_tokens
            if n >= budget:
                break
            self.bm.allocate(seq.seq_id, seq.token_ids)
            self.waiting.popleft()
            self.running.append(seq)
            out.scheduled.append(Chunk(seq, 0, n, self.slots(seq, 0, n), True))
            self.computed[seq.seq_id] = n
            budget -= n


class AdmitPastTheBudget(Chunked):
    """admit loops while requests wait and the cap allows, budget > 0 forgotten."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class HitLookedUpOncePerStep(Chunked):
    """admit looks every waiting request's hit up once, before the loop: blocks an earlier
    admission of the step fills are not seen by a later request that shares them."""

    def admit(self, out: Any, budget: int) -> None:
        hits = {s.seq_id: self.cached_tokens(s) for s in self.waiting}
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = hits[seq.seq_id]
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class VictimReportedTwice(Final):
    """schedule_running lists the victim in out.preempted itself, as preempt already does."""

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
                self.preempt(victim, out)
                out.preempted.append(victim)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class VictimNotPopped(Final):
    """Takes the victim as running[-1] without popping it, and preempt passes over a victim
    already freed: request 2 is preempted twice (it waits twice), not listed twice."""

    def preempt(self, victim: Any, out: Any) -> None:
        try:
            self.bm.free_seq(victim.seq_id)
        except UnknownSequence:
            pass
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)
        out.preempted.append(victim)

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running[-1]
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class VictimTheOldest(Final):
    """schedule_running preempts the oldest running request (pop(0)), not the latest."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop(0)
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                i = max(i - 1, 0)
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step, quiet=True)
    return str(failed.value)


REFERENCE = "in the reference the running requests 0 and 1 decode one token each, in running order"
ONE_TOKEN = "needs one token: n = seq.num_tokens - num_computed_tokens"

# slip, step, what the report must say, what it must no longer say
CASES = {
    "running walked newest first": (
        RunningNewestFirst,
        1,
        [REFERENCE, "yours scheduled the same chunks in the order [1, 0, 2]", "oldest first"],
        [ONE_TOKEN],
    ),
    "a running request takes the budget": (
        RunningTakesTheBudget,
        1,
        [REFERENCE, "is [(0, 3, 10, True)]", "your `schedule_running`"],
        ["in the order"],
    ),
    "a prompt that needs exactly the budget left": (
        AdmitNeedsSpareBudget,
        1,
        [REFERENCE, "your `admit`"],
        [ONE_TOKEN, "This check was written for"],
    ),
    "a chunk of 0 tokens within the budget": (
        AdmitPastTheBudget,
        2,
        [
            "in the reference requests 0 and 1 spend the budget of 10 (6 + 4 tokens)",
            "it gets no chunk of 0 tokens",
        ],
        ["take each chunk's num_tokens from the budget once"],
    ),
    # the program ends at the step that failed: no drain runs on past it, where a step with
    # no token appended would schedule a chunk of none (the reference too)
    "a stale hit, told at the step it ran": (
        HitLookedUpOncePerStep,
        2,
        ["scheduled: got [(0, 0, 8, True", "(1, 0, 1, False, (8,))", "your `admit`"],
        [
            "scheduled with no token",
            "a scheduled chunk runs at least one token",
            "take each chunk's num_tokens from the budget once",
            "computes at most max_num_batched",
        ],
    ),
    "the victim listed twice": (
        VictimReportedTwice,
        3,
        ["yours preempted request 2, the latest running, as the reference does, and listed it 2"],
        ["preempt the latest running request (running.pop())"],
    ),
    "the victim preempted twice, not listed twice": (
        VictimNotPopped,
        3,
        ["preempted (the latest running request is 2) is [2, 2]"],
        ["listed it 2 times", "each victim is reported once"],
    ),
    "the oldest preempted": (
        VictimTheOldest,
        3,
        ["preempted (the latest running request is 2) is [0]", "running.pop()"],
        ["as the reference does"],
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


def test_a_chunk_of_no_token_breaks_its_own_rule_and_an_overspent_step_the_budget() -> None:
    """The machine files a chunk of no token under its own rule, whose hint states no budget
    rule; a step past the budget keeps the budget rule and its hint (twice, prefix hit)."""
    from servelab.grading.token_budget import HINTS
    from servelab.kv.budget import BudgetStep
    from servelab.kv.prefix import PrefixCachingBlockManager
    from servelab.kv.scheduler import Sequence
    from servelab.testing.core import InvariantViolation
    from servelab.testing.token_budget import _state, check_step

    def violation(tokens: int, budget: int) -> InvariantViolation:
        sched = Final(
            PrefixCachingBlockManager(num_blocks=8, block_size=2), max_num_batched_tokens=budget
        )
        seq = Sequence.from_prompt(0, [1, 2, 3, 4], 1)
        sched.add(seq)
        before = _state(sched)
        sched.bm.allocate(0, seq.token_ids[:tokens])
        sched.waiting.popleft()
        sched.running.append(seq)
        sched.computed[0] = tokens
        out = BudgetStep()
        out.scheduled.append(Chunk(seq, 0, tokens, sched.slots(seq, 0, tokens), False, 0))
        with pytest.raises(InvariantViolation) as broken:
            check_step(sched, before, out)
        return broken.value

    empty, over = violation(0, 4), violation(3, 2)
    assert (empty.invariant, str(empty.detail)) == (
        "nonempty",
        "sequence 0 scheduled with no token",
    )
    assert over.invariant == "budget", over
    assert "budget" not in HINTS["nonempty"] and "twice" not in HINTS["nonempty"]
    assert "twice" in HINTS["budget"] and "prefix hit" in HINTS["budget"]
