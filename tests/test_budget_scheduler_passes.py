"""Scheduler and token-budget slips that once passed every grade or were told with a false
sentence, graded end to end: a decode that skips a full pool, a refused admission that records
progress, a running chunk with the slots of the request's first tokens, an id listed where a
sequence belongs."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint, grade
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk
from servelab.kv.scheduler import Decode

Budget1 = checkpoint("token-budget", 1)
Budget2 = checkpoint("token-budget", 2)
Sched2 = checkpoint("scheduler", 2)


def _text(topic: str, impl: Any, step: int) -> str:
    return failing_report(topic, impl, step)[0].text


class DecodeSkipsAFullPool(Sched2):  # type: ignore[misc,valid-type]
    """Catches OutOfBlocks and skips the sequence for this step."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                continue
            out.decodes.append(Decode(seq, slot))


class DecodeStopsAtAFullPool(Sched2):  # type: ignore[misc,valid-type]
    """Stops decoding at the first OutOfBlocks: the rest of running is skipped too."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                break
            out.decodes.append(Decode(seq, slot))


def test_a_decode_that_skips_a_full_pool_is_caught_at_step_2() -> None:
    for impl in (DecodeSkipsAFullPool, DecodeStopsAtAFullPool):
        report = _text("scheduler", impl, 2)
        assert "✗ step 2 · a full pool is not hidden: no decode is skipped" in report
        assert "the step-2 reference lets it reach the caller" in report
        assert "start at your `decode`: yours skipped sequence 1" in report


def test_the_full_pool_check_passes_a_decode_that_preempts() -> None:
    """A step-3 decode preempts where step 2 raises: both keep the full pool in view."""
    for step in (2, 3):
        grade("scheduler", checkpoint("scheduler", 3), step, quiet=True)
    grade("scheduler", Sched2, 2, quiet=True)


class FinishedListedById(Sched2):  # type: ignore[misc,valid-type]
    """Lists a finished sequence's id in out.finished, not the sequence."""

    def retire(self, out: Any) -> None:
        kept = []
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq.seq_id)
            else:
                kept.append(seq)
        self.running = kept


def test_an_id_in_place_of_a_sequence_is_shown_as_the_number_it_is() -> None:
    report = _text("scheduler", FinishedListedById, 2)
    assert "out.finished [] -> [<int 0>]" in report
    assert "yours added <int 0> to `out.finished`" in report
    assert "'0'" not in report


class ComputedBeforeAllocate(Budget2):  # type: ignore[misc,valid-type]
    """Records the head's progress before allocate, which OutOfBlocks may refuse."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            self.computed[seq.seq_id] = hit + n
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            budget -= n


def test_a_refused_admission_that_records_progress_is_caught_at_step_2() -> None:
    report = _text("token-budget", ComputedBeforeAllocate, 2)
    assert "✗ step 2 · a refused admission records no progress" in report
    assert "is 6, expected 0" in report
    assert "start at your `admit`" in report


class RunningSlotsOfTheFirstTokens(Budget1):  # type: ignore[misc,valid-type]
    """A running request's chunk names the slots of its first n tokens."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            self.extend(seq, start, n)
            out.scheduled.append(
                Chunk(seq, start, n, self.slots(seq, 0, n), start + n == seq.num_tokens)
            )
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


class RunningSlotsOneBehind(Budget1):  # type: ignore[misc,valid-type]
    """A look-alike: the slots of positions start - 1 .. start + n - 2, one before the chunk."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            self.extend(seq, start, n)
            first = max(start - 1, 0)
            out.scheduled.append(
                Chunk(seq, start, n, self.slots(seq, first, n), start + n == seq.num_tokens)
            )
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


def test_a_running_chunk_with_wrong_slots_is_told_by_its_slots() -> None:
    report = _text("token-budget", RunningSlotsOfTheFirstTokens, 1)
    assert "✗ step 1 · a decode writes its own position's slot" in report
    assert "yours added a Chunk with slots=[0] to `out.scheduled` where the reference adds " in (
        report
    )
    assert "one with slots=[3]" in report
    assert "scheduled with no token" not in report


def test_the_slots_rule_states_no_cause_for_another_slip() -> None:
    """The hint names the rule every wrong slot breaks, not the first-tokens cause."""
    report = _text("token-budget", RunningSlotsOneBehind, 1)
    assert "✗ step 1 · a decode writes its own position's slot" in report
    assert "a Chunk with slots=[2]" in report and "one with slots=[3]" in report
    assert "first n tokens" not in report and "from 0" not in report
