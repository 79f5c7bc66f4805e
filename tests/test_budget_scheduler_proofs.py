"""Scheduler and token-budget slips graded end to end, each against the sentence meant for
it: a request admitted with a hit looked up steps before, a preemption the extend did not
need, a first victim proven by a re-run (not read from a list written in another order),
running reordered, a decode listed with a slot its append_slot did not return, a fit that
keeps a slot for the first decode."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, Slot
from servelab.kv.budget import Chunk
from servelab.kv.scheduler import Decode

Budget2 = checkpoint("token-budget", 2)
Budget3 = checkpoint("token-budget", 3)
Sched1 = checkpoint("scheduler", 1)
Sched2 = checkpoint("scheduler", 2)


def _text(topic: str, impl: Any, step: int) -> str:
    return failing_report(topic, impl, step)[0].text


class HitKeptFromTheFirstLookup(Budget2):  # type: ignore[misc,valid-type]
    """Remembers each request's prefix hit from the first time it is looked up."""

    def admit(self, out: Any, budget: int) -> None:
        memo = self.__dict__.setdefault("_hit", {})
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = memo.setdefault(seq.seq_id, self.cached_tokens(seq))
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


def test_a_hit_kept_from_an_earlier_step_is_caught_at_step_2() -> None:
    report = _text("token-budget", HitKeptFromTheFirstLookup, 2)
    assert "✗ step 2 · a waiting request's prefix hit is looked up when it is admitted" in report
    assert "where: the difference starts in your `admit`" in report
    assert "yours admitted request 2 from token 2 (num_cached 2), where the cache holds 4" in report


def test_a_chunk_that_leaves_its_hit_unreported_is_not_read_as_a_stale_lookup() -> None:
    from unlisted import unlisted

    slip = next(u for u in unlisted() if u.name == "a prefix hit left out of the chunk")
    report = _text("token-budget", slip.impl, slip.step)
    assert "where: the difference starts in your `admit`" in report
    assert "at its admission (bm.num_cached_tokens)" not in report


class PreemptsForFreshBlocks(Budget3):  # type: ignore[misc,valid-type]
    """Preempts while num_free < blocks_needed(n), as if each chunk started a fresh block."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            if self.bm.num_free < self.bm.blocks_needed(n):
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


def test_a_preemption_no_extend_needed_is_told_with_the_blocks_not_the_recompute_rule() -> None:
    report = _text("token-budget", PreemptsForFreshBlocks, 3)
    assert "preempted in step 4 is [1], expected []" in report
    assert "need 0 new blocks there and 0 are free" in report
    assert "tokens that fit the room left in its last block need none" in report
    # the probe's own rule, which this slip keeps
    assert "whatever it generated before" not in report


def _latest_first(impl: Any) -> Any:
    """``impl``'s schedule_running with the victim chosen by ``impl._victim``."""

    def schedule_running(self: Any, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self._victim()
                self.running.remove(victim)
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                i = self.running.index(seq)
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget

    return schedule_running


class VictimHoldsTheMost(Budget3):  # type: ignore[misc,valid-type]
    """Preempts the running request holding the most tokens (the latest of equals)."""

    def _victim(self) -> Any:
        most = max(s.num_tokens for s in self.running)
        return [s for s in self.running if s.num_tokens == most][-1]

    schedule_running = _latest_first(None)


class VictimsListedOldestFirst(Budget3):  # type: ignore[misc,valid-type]
    """Takes the right victims but writes each at the front of out.preempted."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)
        out.preempted.insert(0, victim)


def test_a_first_victim_proven_by_the_re_run_is_named() -> None:
    report = _text("token-budget", VictimHoldsTheMost, 3)
    assert "yours preempted request 0 first, with 2 running after it" in report
    assert "the last of running (2 here)" in report


def test_victims_listed_in_another_order_are_not_read_as_another_first_victim() -> None:
    report = _text("token-budget", VictimsListedOldestFirst, 3)
    assert "where: the difference starts in your `preempt`" in report
    assert "first, with" not in report
    assert "the victim is the latest running request" not in report


class RunningSortedById(Budget3):  # type: ignore[misc,valid-type]
    """Sorts running by seq_id before scheduling it, as if ids were arrival order."""

    def schedule_running(self, out: Any, budget: int) -> int:
        self.running.sort(key=lambda s: s.seq_id)
        return int(super().schedule_running(out, budget))


def test_running_reordered_is_said_rather_than_the_victim_rule() -> None:
    report = _text("token-budget", RunningSortedById, 3)
    assert "yours left running as [0, 1], where it ran as [2, 1, 0] before the call" in report
    assert "yours preempted request 2;" not in report


class DecodeSlotGuessed(Sched2):  # type: ignore[misc,valid-type]
    """Lists each decode with a slot worked out before its append: the old block when the
    append opens a new one."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            table = self.bm.block_table(seq.seq_id)
            guess = Slot(table[-1], self.bm.seq_len(seq.seq_id) % self.bm.block_size, None)
            self.bm.append_slot(seq.seq_id)
            out.decodes.append(Decode(seq, guess))


class DecodeNewestFirst(Sched2):  # type: ignore[misc,valid-type]
    """Decodes the running sequences newest first: each with the slot its append returned."""

    def decode(self, out: Any) -> None:
        for seq in reversed(self.running):
            out.decodes.append(Decode(seq, self.bm.append_slot(seq.seq_id)))


def test_a_decode_listed_with_another_slot_is_placed_in_decode() -> None:
    report = _text("scheduler", DecodeSlotGuessed, 2)
    assert "where: the difference starts in your `decode`" in report
    assert "its bm.append_slot returned Slot(block=1, offset=0, cow_src=None)" in report
    assert "no one method" not in report


def test_decodes_in_another_order_get_no_slot_sentence() -> None:
    report = _text("scheduler", DecodeNewestFirst, 2)
    assert "where: the difference starts in your `decode`" in report
    assert "bm.append_slot returned" not in report


class FitsKeepsADecodeSlot(Sched1):  # type: ignore[misc,valid-type]
    """Asks for the blocks of n_tokens + 1: a slot kept for the first decode."""

    def fits(self, n_tokens: int) -> bool:
        return bool(self.bm.num_free - self.blocks_needed(n_tokens + 1) >= self.watermark)


def test_a_fit_that_keeps_a_decode_slot_is_told_the_count_not_a_formula_to_change() -> None:
    report = _text("scheduler", FitsKeepsADecodeSlot, 1)
    assert "yours admits 3 tokens but refuses 4, which need the same 1 blocks" in report
    assert "the blocks of the tokens fits is asked about and no more" in report
    assert "count the blocks as" not in report
