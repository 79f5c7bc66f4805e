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
