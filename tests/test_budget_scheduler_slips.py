"""Scheduler and token-budget slips graded end to end: a reading that names a cause is shown
where the slip is that cause, and not for a look-alike whose numbers differ on the proof."""

from __future__ import annotations

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk
from unlisted import unlisted


def _report(topic: str, name: str) -> str:
    slip = next(u for u in unlisted() if u.name == name)
    return failing_report(topic, slip.impl, slip.step)[0].text


class AdmitChargesTheSample(checkpoint("token-budget", 2)):  # type: ignore[misc]
    """Charges an admitted chunk one token more, for the token it will sample: short chunks
    after it too, by another count than whole blocks."""

    def admit(self, out, budget):  # type: ignore[no-untyped-def]
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
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget = max(0, budget - n - 1)


def test_an_admit_that_charges_whole_blocks_is_named_with_its_proof() -> None:
    report = _report("token-budget", "an admitted chunk charged its whole blocks")
    assert "where: the difference starts in your `admit`" in report
    assert "their whole blocks of 4" in report
    assert "not the blocks they fill" in report
    assert "a chunk takes min(tokens still to run, budget left)" not in report


def test_an_admit_that_charges_another_cost_is_not_read_as_whole_blocks() -> None:
    report = failing_report("token-budget", AdmitChargesTheSample, 2)[0].text
    assert "where: the difference starts in your `admit`" in report
    assert "whole blocks" not in report


def test_a_victim_other_than_the_latest_is_named_not_read_from_the_returned_budget() -> None:
    report = _report("token-budget", "the victim spares a request mid-prompt")
    assert "where: the difference starts in your `schedule_running`" in report
    assert "yours preempted request 1 first" in report
    assert "the last of running (2 here)" in report
    assert "off by one" not in report


def test_two_victims_that_start_with_the_latest_get_no_first_victim_sentence() -> None:
    report = _report("token-budget", "a failed extend preempts two")
    assert "where: the difference starts in your `schedule_running`" in report
    assert "first, with" not in report


def test_a_victim_taken_by_the_highest_id_is_caught_on_ids_added_out_of_order() -> None:
    report = _report("token-budget", "the victim has the highest id")
    assert "✗ step 3 · the latest running request is the victim, whatever its id" in report
    assert "ids added as 2, 1, 0: the latest running request is 0, whatever its id" in report
    assert "where: the difference starts in your `schedule_running`" in report
    assert "yours preempted request 2; the victim is the latest running request" in report


def test_a_victim_restarting_from_its_hit_is_not_matched_with_the_kept_count() -> None:
    report = _report("token-budget", "a victim restarts from its prefix hit")
    assert "where: the difference starts in your `preempt`" in report
    assert "yours left request 2's num_computed_tokens at 2" in report
    assert "exactly like" not in report


def test_a_victim_that_keeps_its_count_is_still_matched() -> None:
    from buggy_impls import mistakes

    keep = next(m for m in mistakes("token-budget") if m.name == "preempt_keeps_computed")
    report = failing_report("token-budget", keep.impl, 3)[0].text
    assert "exactly like one that preempts a request without a reset" in report


class AdmitRefillsOneList(checkpoint("token-budget", 1)):  # type: ignore[misc]
    """Keeps one slots list for the step's admissions and refills it for each chunk: every
    chunk admitted in the step holds that list, so all show the last request's slots."""

    def admit(self, out, budget):  # type: ignore[no-untyped-def]
        buffer: list[int] = []
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if seq.num_tokens > budget:
                break
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids)
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            buffer[:] = self.slots(seq, 0, seq.num_tokens)
            out.scheduled.append(Chunk(seq, 0, seq.num_tokens, buffer, True))
            self.computed[seq.seq_id] = seq.num_tokens
            budget -= seq.num_tokens


class RunningRefillsOneList(checkpoint("token-budget", 1)):  # type: ignore[misc]
    """The same mistake in schedule_running: one slots list, refilled for each decode."""

    def schedule_running(self, out, budget):  # type: ignore[no-untyped-def]
        buffer: list[int] = []
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            buffer[:] = self.extend(seq, start, n)
            self.computed[seq.seq_id] = start + n
            out.scheduled.append(Chunk(seq, start, n, buffer, start + n == seq.num_tokens))
            budget -= n
        return budget


class AdmitCopiesTheFirstSlots(checkpoint("token-budget", 1)):  # type: ignore[misc]
    """A look-alike: every admitted chunk gets a new list, but a copy of the first admitted
    request's slots. Wrong slots, and no list is shared."""

    def admit(self, out, budget):  # type: ignore[no-untyped-def]
        first: list[int] | None = None
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if seq.num_tokens > budget:
                break
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids)
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            mine = self.slots(seq, 0, seq.num_tokens)
            first = mine if first is None else first
            out.scheduled.append(Chunk(seq, 0, seq.num_tokens, list(first), True))
            self.computed[seq.seq_id] = seq.num_tokens
            budget -= seq.num_tokens


def test_chunks_admitted_with_one_slots_list_are_named_as_sharing_it() -> None:
    report = failing_report("token-budget", AdmitRefillsOneList, 1)[0].text
    assert "✗ step 1 · each chunk carries its own slots" in report
    assert "yours gave request 0's chunk and request 1's chunk one slots list" in report
    assert "out.scheduled[0].slots is out.scheduled[1].slots  # True" in report
    assert "where: the difference starts in your `admit`" in report
    assert "replayed on a copy, yours gave request 0's chunk and request 1's chunk" in report
    assert "allocate" not in report.split("hint:")[-1]


def test_running_chunks_with_one_slots_list_are_named_as_sharing_it() -> None:
    report = failing_report("token-budget", RunningRefillsOneList, 1)[0].text
    assert "one slots list, the same object" in report
    assert "allocate" not in report.split("hint:")[-1]


def test_chunks_with_new_lists_of_wrong_slots_are_not_read_as_sharing() -> None:
    report = failing_report("token-budget", AdmitCopiesTheFirstSlots, 1)[0].text
    assert "✗ step 1 · each chunk carries its own slots" in report
    assert "the same object" not in report
    assert "of its own" not in report.split("hint:")[-1]
