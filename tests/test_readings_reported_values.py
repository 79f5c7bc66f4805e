"""A reading leans on what the learner's code reported (a chunk in out.scheduled, an entry in
out.decodes) only after checking it against what the code did and what the reference did: a
report that disagrees with the state is named as such, and an update that matched the reference
is never blamed. Each look-alike below once read a rule about an update that was right; each
real slip beside it keeps its reading. Graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk
from servelab.kv.scheduler import Decode

Budget = checkpoint("token-budget", 1)
Chunked = checkpoint("token-budget", 2)
Decoding = checkpoint("scheduler", 2)


class ChunkFromTheCountAfter(Budget):
    """schedule_running advances num_computed_tokens first, then reports the chunk from the
    count it just set: each chunk's start is its end (the count itself is right)."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots = self.extend(seq, start, n)
            self.computed[seq.seq_id] = start + n
            done = start + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, self.computed[seq.seq_id], n, slots, done))
            budget -= n
        return budget


class SampledTokenCounted(Budget):
    """schedule_running counts a sampling chunk's sampled token as computed: the count runs
    one past the chunk's end (the chunk itself is right)."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            done = start + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, start, n, self.extend(seq, start, n), done))
            self.computed[seq.seq_id] = start + n + done
            budget -= n
        return budget


class ChunkCountsTheHit(Chunked):
    """admit allocates and counts from the prefix hit right, but reports the chunk's
    num_tokens as hit + n."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            done = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, hit + n, self.slots(seq, hit, n), done, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class AllocatesASlotMore(Chunked):
    """admit allocates one token past a chunk that does not finish its prompt."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            done = hit + n == seq.num_tokens
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n + (0 if done else 1)])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), done, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class DecodesListedTwice(Decoding):
    """decode appends each Decode in the loop and extends out.decodes with the same list after
    it: every decode listed twice, each slot taken once."""

    def decode(self, out: Any) -> None:
        made = []
        for seq in self.running:
            made.append(Decode(seq, self.bm.append_slot(seq.seq_id)))
            out.decodes.append(made[-1])
        out.decodes.extend(made)


class DecodesTheNewestTwice(Decoding):
    """decode walks running and then decodes the newest sequence once more."""

    def decode(self, out: Any) -> None:
        for seq in [*self.running, *self.running[-1:]]:
            out.decodes.append(Decode(seq, self.bm.append_slot(seq.seq_id)))


def _report(topic: str, impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(topic, impl, step, quiet=True)
    return str(failed.value)


# slip, topic, step, what the report must say, what it must not say
CASES = {
    "chunk reported from the count after it (look-alike)": (
        ChunkFromTheCountAfter,
        "token-budget",
        1,
        ["num_computed_tokens to 4, as the reference does, yet reported its chunk as start 4"],
        ["it becomes the chunk's end"],
    ),
    "cached tokens counted in the chunk (look-alike)": (
        ChunkCountsTheHit,
        "token-budget",
        2,
        ["num_computed_tokens to 10, as the reference does", "num_tokens 10 (ending at 18)"],
        ["it becomes the chunk's end", "tokens' blocks where its chunk ends"],
    ),
    "the sampled token counted as computed (real)": (
        SampledTokenCounted,
        "token-budget",
        1,
        ["yours set request 0's num_computed_tokens to 5 after its chunk of 1 tokens from 3"],
        ["as the reference does, yet reported"],
    ),
    "a slot more allocated (real)": (
        AllocatesASlotMore,
        "token-budget",
        2,
        ["yours left request 0 holding 5 tokens' blocks where its chunk ends at 4"],
        [],
    ),
    "decodes listed twice (look-alike)": (
        DecodesListedTwice,
        "scheduler",
        2,
        ["yours listed sequence 0 2 times in out.decodes, yet its KV grew by one slot"],
        ["decoded sequence 0 2 times"],
    ),
    "the newest decoded twice (real)": (
        DecodesTheNewestTwice,
        "scheduler",
        2,
        ["yours decoded sequence 2 2 times in one step"],
        ["yet its KV grew by one slot"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_reading_checks_what_was_reported(case: str) -> None:
    impl, topic, step, says, never = CASES[case]
    text = _report(topic, impl, step)
    for part in says:
        assert part in text, text
    for part in never:
        assert part not in text, text
