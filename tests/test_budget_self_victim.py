"""Token-budget reports that state only the rule of the step graded: an exact fit left waiting
is told with whole prompts at step 1 and with chunks at step 2; a request that preempted itself
and still ran is named by the check and the hint, on a program that ends at the failing step."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from servelab import checkpoint, grade
from servelab.grading import GradeFailure
from servelab.grading.readings.budget_victims import self_victim_ran
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import BudgetStep, Chunk
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import Sequence
from servelab.testing.core import InvariantViolation
from servelab.testing.token_budget import _state, check_step

T1, T2, T3 = (checkpoint("token-budget", i) for i in (1, 2, 3))

WHOLE = "a prompt is admitted whole while its tokens to run <= the budget left"
CHUNKED = "a chunk of min(tokens to run, budget)"
SELF = "preempted in this step, yet has a chunk in it"
NAMED = "then still scheduled a chunk for it"


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("token-budget", impl, step, quiet=True)
    return str(failed.value)


class WholePromptNeedsSpare(T1):
    """Step 1: admission stops once the head's tokens reach the budget left (`>=`)."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if seq.num_tokens >= budget:
                break
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids)
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            n = seq.num_tokens
            out.scheduled.append(Chunk(seq, 0, n, self.slots(seq, 0, n), True))
            self.computed[seq.seq_id] = n
            budget -= n


class ChunkSkipsAnExactFit(T2):
    """Step 2: chunked admission that leaves waiting a head whose tokens equal the budget."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            if seq.num_tokens - hit == budget:
                break
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


def test_an_exact_fit_at_step_1_is_told_with_whole_prompts() -> None:
    report = _report(WholePromptNeedsSpare, 1)
    assert "room to spare (< where <= belongs)" in report, report
    assert WHOLE in report, report
    assert CHUNKED not in report, report


def test_an_exact_fit_at_step_2_is_told_with_chunks() -> None:
    report = _report(ChunkSkipsAnExactFit, 2)
    assert "exactly the budget left fits" in report, report
    assert CHUNKED in report, report
    assert WHOLE not in report, report


class AskerRunsAfterPreemptingItself(T3):
    """Breaks the retry when the victim is the asker, then records the asker's chunk anyway,
    with the slots list the previous request's extend returned."""

    def schedule_running(self, out: Any, budget: int) -> int:
        slots: list[int] = []
        for seq in self.running:
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
                        break
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


class OneListForEveryDecode(T1):
    """Look-alike: one slots list kept and refilled for every running chunk (no preemption)."""

    def schedule_running(self, out: Any, budget: int) -> int:
        slots: list[int] = []
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots[:] = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


def test_a_request_that_preempted_itself_and_ran_is_named() -> None:
    report = _report(AskerRunsAfterPreemptingItself, 3)
    assert SELF in report, report
    assert NAMED in report and "request asking" in report, report
    assert "a new list per chunk" not in report, report
    # the program ends at the failing step: no step is run after it
    assert "scheduled with no token" not in report, report
    program = report.split("reproduce:")[1].split("where:")[0]
    assert program.rstrip().splitlines()[-1].strip().startswith("[(c.seq.seq_id"), program


def test_a_shared_list_without_preemption_is_not_told_as_a_self_victim() -> None:
    report = _report(OneListForEveryDecode, 1)
    assert "one slots list" in report, report
    assert SELF not in report and NAMED not in report, report


def test_a_preempted_request_with_a_chunk_breaks_the_step_check() -> None:
    bm = PrefixCachingBlockManager(num_blocks=8, block_size=2)
    sched = T3(bm, max_num_batched_tokens=8)
    seq = Sequence.from_prompt(0, [1, 2, 3], 2)
    sched.add(seq)
    sched.step()
    seq.append_token(1)
    before = _state(sched)
    out = BudgetStep()
    sched.computed[0] = 4
    sched.bm.append_slot(0, 1)
    out.scheduled.append(Chunk(seq, 3, 1, sched.slots(seq, 3, 1), True))
    out.num_running = 1
    out.preempted.append(seq)
    with pytest.raises(InvariantViolation) as broken:
        check_step(sched, before, out)
    assert broken.value.invariant == "preempted-idle", broken.value
    out.preempted.clear()
    check_step(sched, before, out)  # the same step without the victim keeps every rule


class AskerRunsAfterAnyError(AskerRunsAfterPreemptingItself):
    """Look-alike: an extend that raises another error than OutOfBlocks on a full pool, and a
    retry that preempts on any error."""

    def extend(self, seq: Any, start: int, n: int) -> list[int]:
        try:
            return super().extend(seq, start, n)
        except OutOfBlocks:
            raise RuntimeError("pool full") from None

    def schedule_running(self, out: Any, budget: int) -> int:
        slots: list[int] = []
        for seq in self.running:
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            while True:
                try:
                    slots = self.extend(seq, start, n)
                    break
                except Exception:
                    victim = self.running.pop()
                    self.preempt(victim, out)
                    if victim is seq:
                        break
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


def _full_pool(cls: type) -> Any:
    """Request 1's next token needs a block and none is free: it preempts itself."""
    sched = cls(PrefixCachingBlockManager(num_blocks=3, block_size=2), max_num_batched_tokens=8)
    seqs = [Sequence.from_prompt(0, [1], 2), Sequence.from_prompt(1, [3, 4, 5, 6], 2)]
    for seq in seqs:
        sched.add(seq)
    sched.step()
    for seq in seqs:
        seq.append_token(1)
    return SimpleNamespace(method="schedule_running", args=(BudgetStep(), 8), subject=sched)


def test_only_an_extend_that_found_no_free_block_is_said_to() -> None:
    said = self_victim_ran(_full_pool(AskerRunsAfterPreemptingItself))
    assert said is not None and "its own extend found no free block" in said, said
    assert self_victim_ran(_full_pool(AskerRunsAfterAnyError)) is None
