"""Token-budget reports proven by running the learner's method again on changed copies: a
cap that counts the step's chunks, a token of budget kept back from each cut chunk, an
allocation that leaves the prefix hit out, a victim lost, a step's victims replaced, a fit
against the pool's size. Each shown on a real slip graded end to end, and kept back on a
look-alike with another cause."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint, grade
from servelab.grading import GradeFailure
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

T1, T2, T3 = (checkpoint("token-budget", i) for i in (1, 2, 3))


def _whole(self: Any, out: Any, budget: int, room: Any) -> None:
    """Step 1's admission, while ``room(self, out)`` says the cap has room."""
    while self.waiting and room(self, out):
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


class CapCountsScheduled(T1):
    """Counts the step's chunks against max_num_seqs beside the running requests."""

    def admit(self, out, budget):
        _whole(self, out, budget, lambda s, o: len(s.running) + len(o.scheduled) < s.max_num_seqs)


class ExactFitWaits(T1):
    """Admits only a prompt shorter than the budget left: an exact fit waits."""

    def admit(self, out, budget):
        _whole(self, out, budget - 1, lambda s, o: len(s.running) < s.max_num_seqs)


def _chunked(self: Any, out: Any, budget: int, size: Any, tokens: Any = None) -> None:
    """Step 2's admission with chunk size ``size(need, budget)`` and allocated tokens
    ``tokens(seq, hit, n)`` (the reference's: token_ids[:hit + n])."""
    while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
        seq = self.waiting[0]
        hit = self.cached_tokens(seq)
        n = size(seq.num_tokens - hit, budget)
        if n <= 0:
            break
        try:
            ids = tokens(seq, hit, n) if tokens else seq.token_ids[: hit + n]
            self.bm.allocate(seq.seq_id, ids)
        except OutOfBlocks:
            break
        self.waiting.popleft()
        self.running.append(seq)
        samples = hit + n == seq.num_tokens
        out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
        self.computed[seq.seq_id] = hit + n
        budget -= n


class KeepsATokenBack(T2):
    """A cut chunk leaves one token of the budget unused."""

    def admit(self, out, budget):
        _chunked(self, out, budget, lambda need, b: need if need <= b else b - 1)


class ChunksOfThreeAtMost(T2):
    """Never runs more than three tokens of a prompt in one chunk."""

    def admit(self, out, budget):
        _chunked(self, out, budget, lambda need, b: min(need, b, 3))


class AllocatesTheChunkAlone(T2):
    """Allocates the chunk's tokens only, token_ids[hit:hit + n]."""

    def admit(self, out, budget):
        _chunked(
            self,
            out,
            budget,
            lambda need, b: min(need, b),
            lambda seq, hit, n: seq.token_ids[hit : hit + n],
        )


class SlotsOneBlockOn(T2):
    """Reads each position's block one entry too far along the table."""

    def slots(self, seq, start, n):
        size, table = self.bm.block_size, self.bm.block_table(seq.seq_id)
        return [table[p // size + 1] * size + p % size for p in range(start, start + n)]


class PreemptDropsVictim(T3):
    """Frees and reports the victim but never queues it again."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        out.preempted.append(victim)


class PreemptQueuesAtBack(T3):
    """Queues the victim behind the requests that came after it."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.append(victim)
        out.preempted.append(victim)


class PreemptReplacesList(T3):
    """Sets out.preempted to this victim alone."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)
        out.preempted = [victim]


class PreemptReportsNone(T3):
    """Never reports a victim in out.preempted."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)


class ExtendAgainstPool(T3):
    """Compares the new blocks with the pool's size, then appends until it runs out."""

    def extend(self, seq, start, n):
        need = self.bm.blocks_needed(start + n) - self.bm.blocks_needed(start)
        if need > self.bm.num_blocks:
            raise OutOfBlocks(f"sequence {seq.seq_id} needs {need} new blocks")
        for token in seq.token_ids[start : start + n]:
            self.bm.append_slot(seq.seq_id, token)
        return self.slots(seq, start, n)


class ExtendChecksNothing(T3):
    """Appends until the block manager runs out, checking nothing first."""

    def extend(self, seq, start, n):
        for token in seq.token_ids[start : start + n]:
            self.bm.append_slot(seq.seq_id, token)
        return self.slots(seq, start, n)


def _words(impl: Any, step: int) -> str:
    """The report, outside the program it reproduces."""
    with pytest.raises(GradeFailure) as failed:
        grade("token-budget", impl, step, quiet=True)
    return "\n".join(line for line in str(failed.value).splitlines() if "Sequence." not in line)


CAP = "yours counts the step's chunks against the cap"
SPARE = "room to spare"
KEPT = "keeps one token of the budget back whenever it cuts a chunk"
HIT = "where it holds its prefix hit"
LOST = "it is in neither running nor waiting"
DROPPED = "the step's earlier victims are dropped"
POOL = "compares the new blocks with the pool's size"

# slip, step, what the report must say, what it must not say
CASES = {
    "the cap counts the step's chunks": (CapCountsScheduled, 1, CAP, SPARE),
    "an exact fit waits": (ExactFitWaits, 1, SPARE, CAP),
    "a token kept back": (KeepsATokenBack, 2, KEPT, SPARE),
    "chunks of three at most": (ChunksOfThreeAtMost, 2, "min(tokens still to run", KEPT),
    "the chunk allocated alone": (AllocatesTheChunkAlone, 2, HIT, KEPT),
    "slots a block along": (SlotsOneBlockOn, 2, "IndexError", HIT),
    "a victim dropped": (PreemptDropsVictim, 3, LOST, DROPPED),
    "a victim queued at the back": (PreemptQueuesAtBack, 3, "front of waiting", LOST),
    "victims replaced": (PreemptReplacesList, 3, DROPPED, LOST),
    "no victim reported": (PreemptReportsNone, 3, "out.preempted", DROPPED),
    "extend against the pool": (ExtendAgainstPool, 3, POOL, "IndexError"),
    "extend checks nothing": (ExtendChecksNothing, 3, "OutOfBlocks", POOL),
}


@pytest.mark.parametrize("case", CASES)
def test_a_proven_reading_shows_where_it_holds_and_only_there(case: str) -> None:
    impl, step, says, never = CASES[case]
    text = _words(impl, step)
    assert says in text, text
    assert never not in text, text


def test_the_hit_left_out_of_num_computed_tokens_is_said() -> None:
    class ComputedTheChunkAlone(T2):
        def admit(self, out, budget):
            first = len(out.scheduled)
            _chunked(self, out, budget, lambda need, b: min(need, b))
            for c in out.scheduled[first:]:
                self.computed[c.seq.seq_id] = c.num_tokens

    assert "the prefix hit of" in _words(ComputedTheChunkAlone, 2)
