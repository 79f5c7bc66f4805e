"""The token-budget scheduler: its rules against an executable model, on both block managers,
and the targeted cases each rule is about."""

from __future__ import annotations

import random

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from servelab.kv.blocks import BlockManager, InvalidConfig
from servelab.kv.budget import BudgetStep, TokenBudgetScheduler, max_kv_tokens
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import (
    DuplicateSequence,
    InvalidRequest,
    InvalidSchedulerConfig,
    NotASequence,
    RequestTooLarge,
    Sequence,
    TokenNotAppended,
)
from servelab.testing.core import thoroughness
from servelab.testing.token_budget import drain, token_budget_machine


def run(sched: TokenBudgetScheduler, steps: int) -> list[list[tuple[int, int, int, bool]]]:
    """``steps`` steps, appending token 7 to each sampler; each step's (id, start, n, samples)."""
    trace = []
    for _ in range(steps):
        out = sched.step()
        trace.append([(c.seq.seq_id, c.start, c.num_tokens, c.samples) for c in out.scheduled])
        for seq in out.computed():
            seq.append_token(7)
    return trace


@pytest.mark.parametrize("prefix_caching", [False, True], ids=["plain", "prefix"])
def test_scheduler_follows_the_model(prefix_caching: bool) -> None:
    machine = token_budget_machine(prefix_caching=prefix_caching)
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=40 * thoroughness(), stateful_step_count=40, deadline=None),
    )


def test_decodes_go_first_and_a_long_prompt_is_chunked() -> None:
    sched = TokenBudgetScheduler(BlockManager(64, 4), max_num_batched_tokens=4)
    sched.add(Sequence.from_prompt(0, [1, 2], 3))
    sched.add(Sequence.from_prompt(1, list(range(10)), 2))
    trace = run(sched, 6)
    assert trace[0] == [(0, 0, 2, True), (1, 0, 2, False)]
    # the decode of 0 first, then what is left of the budget for 1's prompt
    assert trace[1] == [(0, 2, 1, True), (1, 2, 3, False)]
    assert trace[2] == [(0, 3, 1, True), (1, 5, 3, False)]
    assert trace[3] == [(1, 8, 2, True)]  # 0 finished and was retired at this step
    assert trace[4] == [(1, 10, 1, True)]
    assert sched.is_idle or trace[5] == []


def test_budget_counts_tokens_and_cap_counts_requests() -> None:
    sched = TokenBudgetScheduler(BlockManager(64, 4), max_num_batched_tokens=100, max_num_seqs=2)
    for i in range(3):
        sched.add(Sequence.from_prompt(i, [i] * 5, 2))
    out = sched.step()
    assert [c.seq.seq_id for c in out.scheduled] == [0, 1] and out.num_batched_tokens == 10
    assert [s.seq_id for s in sched.waiting] == [2]


def test_prefix_hit_is_computed_and_not_charged_to_the_budget() -> None:
    bm = PrefixCachingBlockManager(32, 4)
    sched = TokenBudgetScheduler(bm, max_num_batched_tokens=3)
    prompt = list(range(9))
    sched.add(Sequence.from_prompt(0, prompt, 1))
    assert run(sched, 3) == [[(0, 0, 3, False)], [(0, 3, 3, False)], [(0, 6, 3, True)]]
    sched.step()  # retires 0; its full blocks stay cached
    sched.add(Sequence.from_prompt(1, prompt, 1))
    out = sched.step()
    (chunk,) = out.scheduled
    # 8 tokens found cached; the last prompt token is computed so the request samples
    assert (chunk.start, chunk.num_cached, chunk.num_tokens, chunk.samples) == (8, 8, 1, True)
    assert sched.num_computed_tokens(1) == 9


def test_full_prompt_hit_still_computes_the_last_token() -> None:
    bm = PrefixCachingBlockManager(32, 4)
    sched = TokenBudgetScheduler(bm, max_num_batched_tokens=16)
    sched.add(Sequence.from_prompt(0, list(range(8)), 1))
    run(sched, 2)
    sched.add(Sequence.from_prompt(1, list(range(8)), 1))
    (chunk,) = sched.step().scheduled
    assert (chunk.start, chunk.num_tokens, chunk.samples) == (4, 4, True)


def test_blocks_are_allocated_per_chunk_not_for_the_whole_prompt() -> None:
    bm = BlockManager(32, 4)
    sched = TokenBudgetScheduler(bm, max_num_batched_tokens=5)
    sched.add(Sequence.from_prompt(0, list(range(20)), 1))
    sched.step()
    assert bm.seq_len(0) == 5 and len(bm.block_table(0)) == 2
    sched.step()  # chunk [5, 10) ends mid-block
    assert bm.seq_len(0) == 10 and len(bm.block_table(0)) == 3


def test_latest_running_is_preempted_by_recompute_and_restarts_from_its_hit() -> None:
    bm = PrefixCachingBlockManager(4, 2)
    sched = TokenBudgetScheduler(bm, max_num_batched_tokens=16)
    a = Sequence.from_prompt(0, [1, 1, 1], 4)
    b = Sequence.from_prompt(1, [2, 2, 2], 4)
    sched.add(a)
    sched.add(b)
    run(sched, 1)  # both prefilled: 2 blocks each, the pool is full
    out = sched.step()  # a's decode at position 3 fits its block; b's too
    for seq in out.computed():
        seq.append_token(5)
    out = sched.step()  # position 4 needs a third block for a: b, the latest, is preempted
    assert [s.seq_id for s in out.preempted] == [1] and [c.seq.seq_id for c in out.scheduled] == [0]
    assert sched.num_computed_tokens(1) == 0 and list(sched.waiting) == [b]
    assert out.admitted == []  # no admission in a step that preempted
    for seq in out.computed():
        seq.append_token(5)
    # b's first full block [2, 2] stays cached: on re-admission it is a hit
    assert bm.num_cached_tokens(b.token_ids) == 2
    drain(sched, lambda s: 5, 50)
    assert a.is_finished and b.is_finished and bm.num_free == bm.num_blocks


def test_a_request_that_preempts_itself_ends_the_running_phase() -> None:
    bm = BlockManager(3, 2)
    sched = TokenBudgetScheduler(bm, max_num_batched_tokens=16)
    a = Sequence.from_prompt(0, [1, 1, 1, 1], 3)  # needs 3 blocks at most: fits alone
    sched.add(a)
    drain(sched, lambda s: 1, 20)
    assert a.is_finished and bm.num_free == 3


def test_watermark_is_off_by_default_and_skipped_for_the_first_request() -> None:
    sched = TokenBudgetScheduler(BlockManager(10, 1), max_num_batched_tokens=100)
    assert sched.watermark_blocks == 0
    sched = TokenBudgetScheduler(BlockManager(10, 1), max_num_batched_tokens=100, watermark=0.3)
    assert sched.watermark_blocks == 3
    sched.add(Sequence.from_prompt(0, [1] * 9, 1))  # leaves 1 free: below 3, but first
    sched.add(Sequence.from_prompt(1, [2], 1))
    out = sched.step()
    assert [c.seq.seq_id for c in out.scheduled] == [0]  # 1 would leave 0 free < 3


def test_watermark_counts_the_cached_free_blocks_a_prefix_hit_revives() -> None:
    # A hit on blocks in the evictable list takes them out of the free count, as vLLM v1's
    # get_num_blocks_to_allocate counts them: B's admission would take 1 new + 3 revived
    # blocks, leaving 2 free, below the watermark of 3 (counting its new block only: 5).
    bm = PrefixCachingBlockManager(8, 2)
    sched = TokenBudgetScheduler(bm, max_num_batched_tokens=100, watermark=0.375)
    sched.add(Sequence.from_prompt(0, [9, 9], 10))  # stays running
    sched.add(Sequence.from_prompt(1, [1, 2, 3, 4, 5, 6, 7], 1))
    assert run(sched, 2) == [[(0, 0, 2, True), (1, 0, 7, True)], [(0, 2, 1, True)]]
    assert bm.num_free == 6 and len(list(bm.evictable())) == 3  # request 1's full blocks
    assert bm.num_blocks_taken([1, 2, 3, 4, 5, 6, 7, 8]) == 4
    sched.add(Sequence.from_prompt(2, [1, 2, 3, 4, 5, 6, 7, 8], 1))
    assert run(sched, 1) == [[(0, 3, 1, True)]]
    assert [s.seq_id for s in sched.waiting] == [2] and bm.num_free == 6
    # with no watermark it is admitted, computing only the 2 tokens after its 6-token hit
    bm = PrefixCachingBlockManager(8, 2)
    sched = TokenBudgetScheduler(bm, max_num_batched_tokens=100)
    sched.add(Sequence.from_prompt(0, [9, 9], 10))
    sched.add(Sequence.from_prompt(1, [1, 2, 3, 4, 5, 6, 7], 1))
    run(sched, 2)
    sched.add(Sequence.from_prompt(2, [1, 2, 3, 4, 5, 6, 7, 8], 1))
    assert run(sched, 1) == [[(0, 3, 1, True), (2, 6, 2, True)]]
    assert bm.num_free == 2


def test_requests_that_can_never_fit_are_rejected_and_change_nothing() -> None:
    sched = TokenBudgetScheduler(BlockManager(4, 2))
    sched.add(Sequence.from_prompt(0, [1] * 6, 3))  # 8 KV slots at most: 4 blocks, fits
    with pytest.raises(RequestTooLarge):
        sched.add(Sequence.from_prompt(1, [1] * 6, 4))
    with pytest.raises(DuplicateSequence):
        sched.add(Sequence.from_prompt(0, [1], 1))
    with pytest.raises(NotASequence):
        sched.add(0)  # type: ignore[arg-type]
    done = Sequence.from_prompt(2, [1], 1)
    done.append_token(1)
    with pytest.raises(InvalidRequest):
        sched.add(done)
    assert [s.seq_id for s in sched.waiting] == [0]
    assert max_kv_tokens(sched.waiting[0]) == 8


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_num_batched_tokens": 0},
        {"max_num_seqs": 0},
        {"max_num_batched_tokens": 2.0},
        {"watermark": 1.0},
        {"watermark": -0.1},
        {"watermark": True},
    ],
)
def test_bad_configuration_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidSchedulerConfig):
        TokenBudgetScheduler(BlockManager(4, 2), **kwargs)  # type: ignore[arg-type]


def test_step_refuses_tokens_not_appended_and_changes_nothing() -> None:
    sched = TokenBudgetScheduler(BlockManager(8, 2), max_num_batched_tokens=2)
    a = Sequence.from_prompt(0, [1, 2, 3], 2)
    sched.add(a)
    sched.step()  # chunk [0, 2): does not sample
    a.append_token(9)  # a token nobody sampled
    with pytest.raises(TokenNotAppended):
        sched.step()
    a.token_ids.pop()
    out = sched.step()
    assert [(c.start, c.num_tokens, c.samples) for c in out.scheduled] == [(2, 1, True)]
    with pytest.raises(TokenNotAppended):  # the sampled token was not appended
        sched.step()
    assert sched.num_computed_tokens(0) == 3


def test_invalid_config_of_the_manager_is_the_managers_error() -> None:
    with pytest.raises(InvalidConfig):
        BlockManager(0, 2)


def test_no_admission_in_a_step_that_preempted_even_where_a_chunk_would_fit() -> None:
    sched = TokenBudgetScheduler(BlockManager(3, 1), max_num_batched_tokens=2)
    a = Sequence.from_prompt(0, [1], 3)
    b = Sequence.from_prompt(1, [2], 3)
    sched.add(a)
    sched.add(b)
    assert run(sched, 1) == [[(0, 0, 1, True), (1, 0, 1, True)]]
    out = sched.step()  # a's decode takes the last block; b must preempt itself
    assert [s.seq_id for s in out.preempted] == [1]
    # one budget token and one block are left, enough for a chunk of b: still, nobody is
    # admitted in a step that preempted (b would only take the block a needs next)
    assert [c.seq.seq_id for c in out.scheduled] == [0] and out.admitted == []
    assert list(sched.waiting) == [b] and sched.bm.num_free == 1


@pytest.mark.parametrize("prefix_caching", [False, True], ids=["plain", "prefix"])
def test_a_failed_extend_is_not_charged_to_the_budget(prefix_caching: bool) -> None:
    """The rule the grader's "failed extend" probe checks in a learner's
    ``schedule_running``, checked through ``step()``: in every step of a workload that
    preempts often, each running request's chunk is what it still needs, cut to the budget
    minus the chunks scheduled before it, and no running request goes without while budget is
    left. (Through ``step()`` a charged failed extend rarely shows: the request that fails is
    mostly the last to run. The next test calls the running phase itself, as the probe does.)"""
    rng = random.Random(5)
    manager = PrefixCachingBlockManager if prefix_caching else BlockManager
    budget = 3
    sched = TokenBudgetScheduler(manager(12, 2), max_num_batched_tokens=budget, max_num_seqs=4)
    arrivals: dict[int, list[Sequence]] = {}
    for seq_id in range(40):
        prompt = [rng.randrange(1, 4) for _ in range(rng.randrange(1, 9))]
        seq = Sequence.from_prompt(seq_id, prompt, rng.randrange(1, 12))
        arrivals.setdefault(rng.randrange(40), []).append(seq)
    retried = 0
    for step in range(1000):
        for seq in arrivals.get(step, []):
            sched.add(seq)
        need = {
            seq.seq_id: seq.num_tokens - sched.num_computed_tokens(seq.seq_id)
            for seq in sched.running
        }
        out = sched.step()
        left = budget
        for chunk in out.scheduled[: out.num_running]:
            assert chunk.num_tokens == min(need[chunk.seq.seq_id], left), (step, chunk)
            left -= chunk.num_tokens
        ran = {chunk.seq.seq_id for chunk in out.scheduled}
        if any(seq.seq_id not in ran for seq in sched.running):
            assert left == 0, (step, "a running request got nothing while budget was left")
        # a victim chosen while a request before it retried: that retry was charged once
        retried += bool(out.preempted) and out.num_running > 0
        for seq in out.computed():
            seq.append_token(rng.randrange(1, 4))
        if step >= 40 and sched.is_idle:
            break
    assert sched.is_idle and retried > 10


def test_schedule_running_returns_the_budget_left_after_a_retry() -> None:
    """The probe's own scenario on the package's running phase: request 0 takes the last free
    block, request 1 finds none, request 2 is preempted and request 1's retry runs on the
    one token of budget left, which it then spends: none is left, and none was lost."""
    sched = TokenBudgetScheduler(PrefixCachingBlockManager(4, 2), max_num_batched_tokens=8)
    for sid in range(3):
        sched.add(Sequence.from_prompt(sid, [10 * sid + 1, 10 * sid + 2], 3))
    for seq in sched.step().computed():
        seq.append_token(0)
    out = BudgetStep()
    left = sched._schedule_running(out, 2)
    assert [(c.seq.seq_id, c.start, c.num_tokens) for c in out.scheduled] == [(0, 2, 1), (1, 2, 1)]
    assert [v.seq_id for v in out.preempted] == [2] and left == 0
