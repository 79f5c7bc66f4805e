"""Token-budget and scheduler reports that name an admission held back by a block, a victim
still walked or left running, a request served twice in a step, a victim taken off running
twice, and a fit asked after the allocation it should decide: each shown on a real slip
graded end to end, and kept back on a look-alike with another cause."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint, grade
from servelab.grading import GradeFailure
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk
from servelab.kv.scheduler import Prefill

S1 = checkpoint("scheduler", 1)
T1, T2, T3 = (checkpoint("token-budget", i) for i in (1, 2, 3))


def _admit_whole(self: Any, out: Any, budget: int, floor: int) -> None:
    """Step 1's admission, stopping once less than ``floor`` tokens of budget are left."""
    while self.waiting and len(self.running) < self.max_num_seqs and budget >= floor:
        seq = self.waiting[0]
        n = seq.num_tokens
        if n > budget:
            break
        try:
            self.bm.allocate(seq.seq_id, seq.token_ids)
        except OutOfBlocks:
            break
        self.waiting.popleft()
        self.running.append(seq)
        out.scheduled.append(Chunk(seq, 0, n, self.slots(seq, 0, n), True))
        self.computed[seq.seq_id] = n
        budget -= n


class WholeBlockOfBudgetFirst(T1):
    """Step 1: admits only while a whole block of budget is left."""

    def admit(self, out: Any, budget: int) -> None:
        _admit_whole(self, out, budget, self.bm.block_size)


class ChunkWantsABlockOfBudget(T2):
    """Step 2: admits nobody while less than a block of budget is left."""

    def admit(self, out: Any, budget: int) -> None:
        size = self.bm.block_size
        while self.waiting and budget >= size and len(self.running) < self.max_num_seqs:
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


class NoChunkUnderABlock(T2):
    """Look-alike: starts no prompt with a chunk shorter than a block, but admits a request
    that fits whole."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            if n < seq.num_tokens - hit and n < self.bm.block_size:
                break
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


class ExactFitWaits(T1):
    """Look-alike: asks for room to spare (a prompt that needs exactly the budget waits)."""

    def admit(self, out: Any, budget: int) -> None:
        _admit_whole(self, out, budget - 1, 0)


def _run(self: Any, out: Any, budget: int, seq: Any, start: int, n: int, slots: Any) -> int:
    out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
    self.computed[seq.seq_id] = start + n
    return budget - n


class WalksACopyOfRunning(T3):
    """Walks a snapshot of running: a victim preempted earlier in the step is visited too."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in list(self.running):
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            while True:
                try:
                    slots = self.extend(seq, start, n)
                    break
                except OutOfBlocks:
                    victim = self.running.pop()
                    self.preempt(victim, out)
                    if victim is seq:
                        return budget
            budget = _run(self, out, budget, seq, start, n, slots)
        return budget


def _indexed(self: Any, out: Any, budget: int, take: Any) -> int:
    """The notebook's loop over running by index, the victim chosen by ``take``."""
    i = 0
    while i < len(self.running) and budget > 0:
        seq = self.running[i]
        start = self.computed[seq.seq_id]
        n = min(seq.num_tokens - start, budget)
        try:
            slots = self.extend(seq, start, n)
        except OutOfBlocks:
            victim = take(self.running)
            self.preempt(victim, out)
            if victim is seq:
                return budget
            continue
        budget = _run(self, out, budget, seq, start, n, slots)
        i += 1
    return budget


class VictimLeftRunning(T3):
    """Preempts running[-1] without taking it off running."""

    def schedule_running(self, out: Any, budget: int) -> int:
        return _indexed(self, out, budget, lambda running: running[-1])


class VictimTheOldest(T3):
    """Look-alike: takes the oldest running request off running (pop(0)) for the victim."""

    def schedule_running(self, out: Any, budget: int) -> int:
        return _indexed(self, out, budget, lambda running: running.pop(0))


class ServedAgainAfterPreempting(T3):
    """After a preemption restarts its walk from the first running request."""

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
                if victim is seq:
                    return budget
                i = 0
                continue
            budget = _run(self, out, budget, seq, start, n, slots)
            i += 1
        return budget


class PreemptRemovesAgain(T3):
    """preempt also takes the victim off running, which schedule_running has popped."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.running.remove(victim)
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)
        out.preempted.append(victim)


class PreemptNotListed(T3):
    """Look-alike: frees, resets and requeues the victim, but never lists it."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)


class FitsAskedAfterAllocating(S1):
    """Allocates the head, then asks fits of the pool it left: its blocks count twice."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting[0]
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            if not self.fits(seq.num_tokens):
                self.bm.free_seq(seq.seq_id)
                break
            self.waiting.popleft()
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class FreeCountAfterAllocating(S1):
    """Look-alike: allocates first, then tests the free count left against the watermark
    with a strict comparison, never asking fits."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting[0]
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            if self.bm.num_free <= self.watermark:
                self.bm.free_seq(seq.seq_id)
                break
            self.waiting.popleft()
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


def _words(topic: str, impl: Any, step: int) -> str:
    """The report, outside the program it reproduces."""
    with pytest.raises(GradeFailure) as failed:
        grade(topic, impl, step, quiet=True)
    return "\n".join(line for line in str(failed.value).splitlines() if "Sequence." not in line)


BLOCK = "The budget counts tokens, not blocks"
COPY = "Does yours walk a copy of running?"
LEFT = "and left it in running"
TWICE = "off running, where it no longer is"
AGAIN = "room twice in one call"
LATE = "then asked fits("

# slip, topic, step, what the report must say, what it must not say
CASES = {
    "a block of budget, step 1": (WholeBlockOfBudgetFirst, "token-budget", 1, BLOCK, COPY),
    "a block of budget, step 2": (ChunkWantsABlockOfBudget, "token-budget", 2, BLOCK, COPY),
    "no chunk under a block": (NoChunkUnderABlock, "token-budget", 2, "one token if", BLOCK),
    "room to spare": (ExactFitWaits, "token-budget", 1, "room to spare", BLOCK),
    "a walk over a copy": (WalksACopyOfRunning, "token-budget", 3, COPY, AGAIN),
    "a walk restarted": (ServedAgainAfterPreempting, "token-budget", 3, AGAIN, COPY),
    "a victim left running": (VictimLeftRunning, "token-budget", 3, LEFT, COPY),
    "the oldest for victim": (VictimTheOldest, "token-budget", 3, "the latest running", LEFT),
    "the oldest, not served twice": (VictimTheOldest, "token-budget", 3, "pop()", AGAIN),
    "taken off running twice": (
        PreemptRemovesAgain,
        "token-budget",
        3,
        TWICE,
        "did not put request 2 in out.preempted",
    ),
    "a victim not listed": (PreemptNotListed, "token-budget", 3, "out.preempted once", TWICE),
    "fits asked after allocating": (FitsAskedAfterAllocating, "scheduler", 1, LATE, "(a loop)"),
    "a free count after allocating": (FreeCountAfterAllocating, "scheduler", 1, "admit", LATE),
}


@pytest.mark.parametrize("case", CASES)
def test_a_report_names_only_what_its_re_run_proves(case: str) -> None:
    impl, topic, step, said, unsaid = CASES[case]
    words = _words(topic, impl, step)
    assert said in words, words
    assert unsaid not in words, words


def test_a_block_of_budget_is_proven_at_the_block_and_one_token_under() -> None:
    words = _words("token-budget", ChunkWantsABlockOfBudget, 2)
    assert "yours admits it with 4 left and not with 3" in words, words


def test_fits_after_allocating_shows_the_pool_both_ways() -> None:
    words = _words("scheduler", FitsAskedAfterAllocating, 1)
    assert "fits(16) of the pool that allocation left (4 free, not 8)" in words, words
