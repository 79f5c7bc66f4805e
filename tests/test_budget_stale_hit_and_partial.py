"""A hit looked up once for a whole admission, and a chunk's slots appended one token at a
time without undo, graded end to end: each reading appears where its slip is, and not for a
look-alike whose difference lies elsewhere."""

from __future__ import annotations

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk
from unlisted.token_budget import VictimHighestId

Chunked = checkpoint("token-budget", 2)
Final = checkpoint("token-budget", 3)


class OneLookupPerStep(Chunked):  # type: ignore[misc,valid-type]
    """Looks the prefix hit up for the head of waiting before the loop, and admits everyone
    in the step from that one number."""

    def admit(self, out, budget):  # type: ignore[no-untyped-def]
        stale = self.cached_tokens(self.waiting[0]) if self.waiting else 0
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = min(seq.num_tokens - stale, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: stale + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            end = stale + n
            out.scheduled.append(
                Chunk(seq, stale, n, self.slots(seq, stale, n), end == seq.num_tokens, stale)
            )
            self.computed[seq.seq_id] = end
            budget -= n


class NeverLooksUp(Chunked):  # type: ignore[misc,valid-type]
    """A look-alike: never asks for the hit at all (0 for everyone): the first admitted request
    is already wrong, and no earlier admission of the call had its start."""

    def cached_tokens(self, seq):  # type: ignore[no-untyped-def]
        return 0


class AppendsTokenByToken(Final):  # type: ignore[misc,valid-type]
    """Reserves a running chunk with one bm.append_slot per token and catches the refusal of
    one of them: the appends before it stay."""

    def schedule_running(self, out, budget):  # type: ignore[no-untyped-def]
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                for position in range(start, start + n):
                    self.bm.append_slot(seq.seq_id, seq.token_ids[position])
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            slots = self.slots(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


def test_a_hit_looked_up_once_is_shown_as_an_earlier_admissions_hit() -> None:
    report = failing_report("token-budget", OneLookupPerStep, 2)[0].text
    assert "✗ step 2 · a prefix hit is not charged to the budget" in report
    assert "where the cache holds 0 of its tokens before the call and after it" in report
    assert "8 is the hit of request 1, admitted before it in this call" in report


def test_a_hit_never_looked_up_is_not_read_as_an_earlier_admissions_hit() -> None:
    report = failing_report("token-budget", NeverLooksUp, 2)[0].text
    assert "admitted before it in this call" not in report


def test_slots_appended_one_by_one_without_undo_are_named() -> None:
    report = failing_report("token-budget", AppendsTokenByToken, 3)[0].text
    assert "where: the difference starts in your `schedule_running`" in report
    assert "yours appended request 1's tokens one by one (bm.append_slot)" in report
    assert "the next raised OutOfBlocks, and that one stayed" in report


def test_a_wrong_victim_is_not_read_as_slots_appended_one_by_one() -> None:
    report = failing_report("token-budget", VictimHighestId, 3)[0].text
    assert "one by one" not in report
