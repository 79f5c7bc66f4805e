"""The reference scheduler: errors, the step rules, swap, liveness and the seed's simulation."""

from __future__ import annotations

import copy
import pickle
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from servelab.kv.blocks import BlockManager, OutOfBlocks, Slot, UnknownSequence
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import (
    Decode,
    DuplicateSequence,
    HostBlockPool,
    InvalidRequest,
    InvalidSchedulerConfig,
    NotASequence,
    Prefill,
    RequestTooLarge,
    Scheduler,
    Sequence,
    SequenceFinished,
    StepFailed,
    StepOutput,
    TokenNotAppended,
    default_watermark,
)
from servelab.kv.sim import Arrival, SimulationStalled, emit_tokens, random_workload, simulate
from servelab.testing.block_manager import snapshot
from servelab.testing.core import InvariantViolation, thoroughness
from servelab.testing.prefix_cache import prefix_snapshot
from servelab.testing.scheduler import (
    QueueState,
    check_scheduler_invariants,
    check_step_rules,
    run_until_idle,
    scheduler_machine,
)


def state(sched: Scheduler) -> tuple[Any, ...]:
    return (
        [s.seq_id for s in sched.running],
        [s.seq_id for s in sched.waiting],
        sched.bm.free_list(),
    )


# --- sequences and configuration -----------------------------------------------------------


def test_sequence_counts_prompt_and_generated_tokens() -> None:
    seq = Sequence.from_prompt(7, [5, 6, 7], max_new_tokens=2)
    assert (seq.num_tokens, seq.num_generated, seq.max_len, seq.is_finished) == (3, 0, 5, False)
    seq.append_token(9)
    seq.append_token(4)
    assert seq.token_ids == [5, 6, 7, 9, 4] and seq.num_generated == 2 and seq.is_finished
    with pytest.raises(SequenceFinished):
        seq.append_token(1)
    assert seq.num_tokens == 5


@pytest.mark.parametrize(
    "args",
    [(0, [], 0, 1), (0, [1, 2], 3, 1), (0, [1], 1, 0), ("a", [1], 1, 1), (0, [1, 2, 3], 1, 1)],
)
def test_malformed_sequences_are_rejected(args: tuple[Any, ...]) -> None:
    with pytest.raises(InvalidRequest):
        Sequence(*args)


def test_dummy_sequences_never_share_a_prefix() -> None:
    a, b = Sequence.dummy(1, 4, 1), Sequence.dummy(2, 4, 1)
    assert a.token_ids[0] != b.token_ids[0]


@pytest.mark.parametrize(("blocks", "want"), [(1, 0), (2, 1), (99, 1), (200, 2), (5000, 50)])
def test_default_watermark_is_one_percent_at_least_one(blocks: int, want: int) -> None:
    assert default_watermark(blocks) == want
    assert Scheduler(BlockManager(blocks, 4)).watermark == want


@pytest.mark.parametrize(
    "kwargs", [{"watermark": 8}, {"watermark": -1}, {"watermark": 1.5}, {"preemption": "drop"}]
)
def test_bad_configuration_raises(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidSchedulerConfig):
        Scheduler(BlockManager(8, 4), **kwargs)
    with pytest.raises(InvalidSchedulerConfig):
        HostBlockPool(-1)


# --- add ------------------------------------------------------------------------------------


def test_too_large_is_exactly_more_than_pool_minus_watermark() -> None:
    sched = Scheduler(BlockManager(8, 4), watermark=2)
    sched.add(Sequence.dummy(0, 20, 4))  # 24 tokens = 6 blocks = 8 - 2
    before = state(sched)
    with pytest.raises(RequestTooLarge) as info:
        sched.add(Sequence.dummy(1, 20, 5))
    assert isinstance(info.value, ValueError) and "7 blocks" in str(info.value)
    assert state(sched) == before


def test_add_rejects_duplicates_and_finished_sequences_without_change() -> None:
    bm = BlockManager(8, 4)
    bm.allocate(5, 3)  # held outside the scheduler (say, by the engine)
    sched = Scheduler(bm, watermark=0)
    sched.add(Sequence.dummy(0, 3, 2))
    done = Sequence(1, [1, 1, 1], 2, 1)
    before = state(sched)
    for bad, error in (
        (Sequence.dummy(0, 2, 1), DuplicateSequence),
        (Sequence.dummy(5, 2, 1), DuplicateSequence),
        (done, InvalidRequest),
        ("not a sequence", TypeError),
    ):
        with pytest.raises(error):
            sched.add(bad)  # type: ignore[arg-type]
        assert state(sched) == before


def test_sequence_lookup() -> None:
    sched = Scheduler(BlockManager(8, 4), watermark=0)
    seq = Sequence.dummy(3, 2, 2)
    sched.add(seq)
    assert sched.sequence(3) is seq
    with pytest.raises(UnknownSequence):
        sched.sequence(4)


# --- the step -------------------------------------------------------------------------------


def test_step_admits_decodes_and_retires_in_order() -> None:
    bm = BlockManager(16, 4)
    sched = Scheduler(bm, watermark=1)
    a, b = Sequence.dummy(0, 4, 2), Sequence.dummy(1, 6, 1)
    sched.add(a)
    sched.add(b)
    out = sched.step()
    assert [(p.seq, p.num_tokens) for p in out.prefills] == [(a, 4), (b, 6)]
    assert out.decodes == [] and out.computed() == [a, b]
    emit_tokens(out, token=42)
    assert a.token_ids[-1] == 42 and b.is_finished
    out = sched.step()
    assert out.finished == [b] and [d.seq for d in out.decodes] == [a]
    slot = out.decodes[0].slot
    assert (slot.block, slot.offset, slot.cow_src) == (bm.block_table(0)[-1], 0, None)
    emit_tokens(out)
    out = sched.step()
    assert out.finished == [a] and sched.is_idle and bm.num_free == 16


def test_step_refuses_to_run_before_tokens_are_appended() -> None:
    sched = Scheduler(BlockManager(8, 4), watermark=0)
    sched.add(Sequence.dummy(0, 3, 3))
    sched.step()
    before = state(sched)
    with pytest.raises(TokenNotAppended):
        sched.step()
    assert state(sched) == before


@pytest.mark.parametrize("forked", [False, True])
def test_every_running_sequence_needs_exactly_one_new_token(forked: bool) -> None:
    """After a prefill, a decode, a decode that preempted and a swap-in, one token too many or
    too few is refused, whether the scheduler noted the count itself or (a fork, which has no
    note) asks its block manager."""
    sched = Scheduler(BlockManager(6, 2), watermark=0, preemption="swap", num_host_blocks=4)
    for i in range(3):
        sched.add(Sequence.dummy(i, 2, 6))
    kinds: set[str] = set()
    forks = 0
    for _ in range(40):
        if sched.is_idle:
            break
        out = sched.step()
        kinds |= {"prefill"} if out.prefills else set()
        kinds |= {"preempted"} if out.preempted else set()
        kinds |= {"swap-in"} if out.swapped_in else set()
        emit_tokens(out)
        unfinished = [s for s in sched.running if not s.is_finished]
        if forked and unfinished and sched.bm.num_free:
            parent = unfinished[0]
            child = Sequence(100 + forks, list(parent.token_ids), 2, parent.max_new_tokens)
            sched.fork(parent, child)
            unfinished, forks = [child], forks + 1
        for seq in unfinished[:1]:
            seq.token_ids.append(0)  # one too many
            with pytest.raises(TokenNotAppended):
                sched.step()
            seq.token_ids.pop()
            seq.token_ids.pop()  # one too few
            with pytest.raises(TokenNotAppended):
                sched.step()
            seq.token_ids.append(0)
    assert sched.is_idle and sched.bm.num_free == 6
    assert kinds == {"prefill", "preempted", "swap-in"} if not forked else forks > 2


def test_preemption_takes_the_newest_and_requeues_it_first() -> None:
    bm = BlockManager(2, 2)
    sched = Scheduler(bm, watermark=0)
    seqs = [Sequence.dummy(0, 2, 2), Sequence.dummy(1, 2, 2), Sequence.dummy(2, 1, 1)]
    for s in seqs:
        sched.add(s)
    emit_tokens(sched.step())
    out = sched.step()
    assert out.preempted == [seqs[1]] and [d.seq for d in out.decodes] == [seqs[0]]
    assert list(sched.waiting) == [seqs[1], seqs[2]] and out.prefills == []
    emit_tokens(out)
    out = sched.step()  # sequence 0 retires; sequence 1 comes back at prompt + generated
    assert out.finished == [seqs[0]]
    assert [(p.seq.seq_id, p.num_tokens) for p in out.prefills] == [(1, 3)]


def test_the_victim_can_be_the_sequence_that_asked() -> None:
    bm = BlockManager(3, 2)
    sched = Scheduler(bm, watermark=0)
    a, b = Sequence.dummy(0, 2, 4), Sequence.dummy(1, 2, 4)
    sched.add(a)
    sched.add(b)
    emit_tokens(sched.step())  # a, b hold 1 block each; 1 free
    out = sched.step()  # a takes the last block; b needs one and is itself the newest
    assert [d.seq for d in out.decodes] == [a] and out.preempted == [b]


# --- the rules under random workloads ---------------------------------------------------------


def test_reference_agrees_with_the_model() -> None:
    machine = scheduler_machine(Scheduler, stage=3)
    machine.call_timeout = 60.0  # generous: a loaded CI box must never look hung
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=60 * thoroughness(), stateful_step_count=40),
    )


workloads = st.lists(
    st.tuples(
        st.integers(0, 30),  # arrival step
        st.integers(1, 40),  # prompt length
        st.integers(1, 30),  # max new tokens
    ),
    min_size=1,
    max_size=25,
)


@given(
    work=workloads,
    num_blocks=st.integers(4, 40),
    block_size=st.sampled_from([1, 2, 4, 16]),
    watermark=st.integers(0, 3),
)
def test_random_workloads_drain_live_without_leaks(
    work: list[tuple[int, int, int]], num_blocks: int, block_size: int, watermark: int
) -> None:
    bm = BlockManager(num_blocks, block_size)
    sched = Scheduler(bm, watermark=min(watermark, num_blocks - 1))
    limit = sched.max_request_blocks() * block_size
    arrivals = [
        Arrival(t, min(p, limit - 1), min(n, limit - min(p, limit - 1)))
        for t, p, n in work
        if limit >= 2
    ]
    if not arrivals:
        return
    seqs: dict[int, Sequence] = {}
    pending = sorted(enumerate(arrivals), key=lambda ia: ia[1].step)
    step = 0
    while pending:  # arrivals over time, every step checked against the rules
        while pending and pending[0][1].step <= step:
            sid, a = pending.pop(0)
            seqs[sid] = Sequence.dummy(sid, a.prompt_len, a.max_new_tokens)
            sched.add(seqs[sid])
        before = QueueState.of(sched)
        out = sched.step()
        check_step_rules(sched, before, out)
        assert not (out.preempted and out.prefills), "a preempting step never admits"
        emit_tokens(out)
        check_scheduler_invariants(sched)
        step += 1
    run_until_idle(sched)  # then drain: liveness bound, the rules, no leaked block
    assert bm.num_free == num_blocks
    assert all(s.num_generated == s.max_new_tokens for s in seqs.values())


def test_the_liveness_check_catches_a_scheduler_that_starves() -> None:
    class NeverAdmits(Scheduler):
        def _admit(self, out: StepOutput) -> None:
            pass

    sched = NeverAdmits(BlockManager(8, 4), watermark=0)
    sched.add(Sequence.dummy(0, 2, 2))
    with pytest.raises(InvariantViolation) as info:
        run_until_idle(sched)
    assert info.value.invariant == "liveness"


def test_the_step_rules_catch_a_leak_and_a_wrong_victim() -> None:
    class LeaksFinished(Scheduler):
        def _retire(self, out: StepOutput) -> None:
            done = [s for s in self.running if s.is_finished]
            self.running = [s for s in self.running if not s.is_finished]
            out.finished.extend(done)

    sched = LeaksFinished(BlockManager(8, 4), watermark=0)
    sched.add(Sequence.dummy(0, 2, 1))
    with pytest.raises(InvariantViolation) as info:
        run_until_idle(sched)
    assert info.value.invariant == "finished-freed"


def test_simulate_reports_a_stall() -> None:
    class Stuck(Scheduler):
        def step(self) -> StepOutput:
            return StepOutput()

    with pytest.raises(SimulationStalled):
        simulate(Stuck(BlockManager(8, 4)), [Arrival(0, 2, 2)], max_steps=10)


def test_the_seeds_simulation_drains_with_zero_leaked_blocks() -> None:
    workload = random_workload(120, seed=3)
    result = simulate(Scheduler(BlockManager(200, 16)), workload)
    assert result.finished == 120 and result.leaked_blocks == 0
    assert result.preemptions > 0  # the pool is small for this load; see notebook 04
    # every token is sampled by a decode or a prefill; a recompute prefill samples one too
    assert result.prefills == 120 + result.preemptions
    assert result.decode_tokens + result.prefills == sum(a.max_new_tokens for a in workload)


def test_a_watermark_reduces_wasted_recompute() -> None:
    workload = random_workload(120, seed=3)
    runs = [simulate(Scheduler(BlockManager(200, 16), watermark=w), workload) for w in (0, 16)]
    assert runs[1].preemptions < runs[0].preemptions
    assert runs[1].recomputed_tokens < runs[0].recomputed_tokens


# --- swap -----------------------------------------------------------------------------------


class ShadowEngine:
    """Executes StepOutputs on a fake cache: each slot holds (seq_id, position) of its token."""

    def __init__(self, bm: BlockManager) -> None:
        self.bm = bm
        self.gpu: dict[tuple[int, int], tuple[int, int]] = {}
        self.host: dict[tuple[int, int], tuple[int, int]] = {}

    def run(self, out: StepOutput) -> None:
        size = self.bm.block_size
        for src, dst in out.swap_out:
            for j in range(size):
                self.host[(dst, j)] = self.gpu.get((src, j), (-1, -1))
        for src, dst in out.swap_in:
            for j in range(size):
                self.gpu[(dst, j)] = self.host.get((src, j), (-1, -1))
        for p in out.prefills:
            table = self.bm.block_table(p.seq.seq_id)
            for pos in range(p.num_tokens):
                self.gpu[(table[pos // size], pos % size)] = (p.seq.seq_id, pos)
        for d in out.decodes:
            self.gpu[(d.slot.block, d.slot.offset)] = (d.seq.seq_id, d.seq.num_tokens - 1)
        emit_tokens(out)

    def check(self, sched: Scheduler) -> None:
        size = self.bm.block_size
        for seq in sched.running:
            table = self.bm.block_table(seq.seq_id)
            for pos in range(self.bm.seq_len(seq.seq_id)):
                got = self.gpu.get((table[pos // size], pos % size))
                assert got == (seq.seq_id, pos), (seq, pos, got)


@given(
    work=workloads,
    num_blocks=st.integers(4, 24),
    host_blocks=st.integers(0, 12),
    block_size=st.sampled_from([1, 2, 4]),
)
def test_swap_brings_back_exactly_the_kv_it_took(
    work: list[tuple[int, int, int]], num_blocks: int, host_blocks: int, block_size: int
) -> None:
    bm = BlockManager(num_blocks, block_size)
    sched = Scheduler(bm, watermark=1, preemption="swap", num_host_blocks=host_blocks)
    engine = ShadowEngine(bm)
    limit = sched.max_request_blocks() * block_size
    for sid, (_, p, n) in enumerate(work):
        if p + n <= limit:
            sched.add(Sequence.dummy(sid, p, n))
    steps = 0
    while not sched.is_idle:
        out = sched.step()
        assert len({c for _, c in out.swap_out}) == len(out.swap_out)
        engine.run(out)
        engine.check(sched)
        check_scheduler_invariants(sched)
        steps += 1
        assert steps < 5000
    assert bm.num_free == num_blocks and sched.host.num_free == host_blocks


def test_swap_falls_back_to_recompute_when_the_host_is_full() -> None:
    bm = BlockManager(2, 2)
    sched = Scheduler(bm, watermark=0, preemption="swap", num_host_blocks=0)
    a, b = Sequence.dummy(0, 2, 2), Sequence.dummy(1, 2, 2)
    sched.add(a)
    sched.add(b)
    emit_tokens(sched.step())
    out = sched.step()
    assert out.preempted == [b] and out.swap_out == [] and not sched.is_swapped(1)


def test_swap_out_then_in_reports_block_mappings() -> None:
    bm = BlockManager(2, 2)
    sched = Scheduler(bm, watermark=0, preemption="swap", num_host_blocks=4)
    a, b = Sequence.dummy(0, 2, 2), Sequence.dummy(1, 2, 2)
    sched.add(a)
    sched.add(b)
    emit_tokens(sched.step())
    b_block = bm.block_table(1)
    out = sched.step()
    assert out.preempted == [b] and [g for g, _ in out.swap_out] == b_block
    assert sched.is_swapped(1) and sched.host.num_free == 3
    emit_tokens(out)
    out = sched.step()  # a retires; b is swapped back in, with no prefill
    assert out.swapped_in == [b] and out.prefills == []
    assert [g for _, g in out.swap_in] == bm.block_table(1) and bm.seq_len(1) == 2
    assert sched.host.num_free == 4


def test_host_pool_take_is_all_or_nothing() -> None:
    host = HostBlockPool(3)
    assert host.take(2) == [0, 1]
    with pytest.raises(OutOfBlocks):
        host.take(2)
    assert host.num_free == 1


# --- fork -----------------------------------------------------------------------------------


def test_a_fork_shares_blocks_and_copies_on_its_first_write() -> None:
    bm = BlockManager(8, 4)
    sched = Scheduler(bm, watermark=0)
    parent = Sequence.dummy(0, 5, 3)
    sched.add(parent)
    emit_tokens(sched.step())  # parent: 6 tokens, 5 KV slots (one full block + 1 slot)
    child = Sequence(1, list(parent.token_ids), parent.prompt_len, parent.max_new_tokens)
    sched.fork(parent, child)
    assert bm.block_table(1) == bm.block_table(0) and sched.running == [parent, child]
    out = sched.step()
    (d0, d1) = out.decodes
    assert d0.seq is parent and d0.slot.cow_src == bm.block_table(1)[-1]  # the first writer copies
    assert d1.seq is child and d1.slot.cow_src is None  # the last holder writes in place
    emit_tokens(out)
    check_scheduler_invariants(sched)


def test_bad_forks_change_nothing() -> None:
    sched = Scheduler(BlockManager(8, 4), watermark=0)
    parent, waiting = Sequence.dummy(0, 5, 3), Sequence.dummy(1, 2, 2)
    sched.add(parent)
    emit_tokens(sched.step())
    sched.add(waiting)
    before = state(sched)
    twin = Sequence(2, list(parent.token_ids), 5, 3)
    for par, kid, error in (
        (waiting, Sequence(3, list(waiting.token_ids), 2, 2), UnknownSequence),
        (parent, Sequence(1, list(parent.token_ids), 5, 3), DuplicateSequence),
        (parent, Sequence(2, [9, 9, 9, 9, 9, 9], 5, 3), InvalidRequest),
    ):
        with pytest.raises(error):
            sched.fork(par, kid)
        assert state(sched) == before
    sched.fork(parent, twin)
    assert [s.seq_id for s in sched.running] == [0, 2]


def test_fork_of_something_that_is_not_a_sequence_is_a_typed_error() -> None:
    sched = Scheduler(BlockManager(8, 4), watermark=0)
    parent = Sequence.dummy(0, 5, 3)
    sched.add(parent)
    emit_tokens(sched.step())
    before = state(sched)
    child = Sequence(1, list(parent.token_ids), 5, 3)
    for par, kid in ((None, child), (parent, None), (0, child)):
        with pytest.raises(NotASequence, match="fork\\(\\) takes two Sequences"):
            sched.fork(par, kid)  # type: ignore[arg-type]
        assert state(sched) == before
    with pytest.raises(NotASequence):
        sched.add(3)  # type: ignore[arg-type]
    assert issubclass(NotASequence, TypeError)


# --- a prefix-caching block manager under the same scheduler --------------------------------


def test_the_scheduler_drives_a_prefix_cache_and_reports_cached_tokens() -> None:
    bm = PrefixCachingBlockManager(6, 2)
    sched = Scheduler(bm, watermark=0, preemption="swap", num_host_blocks=8)
    a = Sequence.from_prompt(0, [1, 2, 3, 4, 5], 6)
    b = Sequence.from_prompt(1, [1, 2, 3, 4, 5], 6)
    sched.add(a)
    sched.add(b)
    out = sched.step()
    assert out.prefills == [Prefill(a, 5, 0), Prefill(b, 5, 4)]  # b finds 2 blocks cached
    assert bm.block_table(1)[:2] == bm.block_table(0)[:2]
    for _ in range(4):
        emit_tokens(out)
        out = sched.step()
    assert out.preempted == [b] and len(out.swap_out) == 4  # b's whole table goes to host
    while not out.swapped_in:
        emit_tokens(out)
        out = sched.step()
    # b comes back: its first three blocks are found in the cache (a wrote the same tokens),
    # so only the fourth is copied in from the host.
    assert out.swapped_in == [b] and bm.seq_len(1) == b.num_tokens - 1
    assert [dev for _, dev in out.swap_in] == bm.block_table(1)[3:]
    while not sched.is_idle:
        emit_tokens(out)
        out = sched.step()
    assert bm.num_free == 6 and bm.sequences() == []


# --- the decode step in one call --------------------------------------------------------------


def _one_at_a_time(manager: type) -> type:
    """The same manager with its one-call step refused: the scheduler must fall back to one
    ``append_slot`` at a time."""

    class OneAtATime(manager):  # type: ignore[misc, valid-type]
        def append_slots(self, seqs: Any, token_ids: Any = None) -> Any:
            raise OutOfBlocks("refused, to test the fallback")

    return OneAtATime


def _step_record(out: StepOutput) -> tuple[Any, ...]:
    return (
        [(d.seq.seq_id, d.slot) for d in out.decodes],
        [(p.seq.seq_id, p.num_tokens, p.num_cached) for p in out.prefills],
        [s.seq_id for s in out.preempted],
        [s.seq_id for s in out.finished],
        list(out.swap_out),
        list(out.swap_in),
    )


@pytest.mark.parametrize("manager", [BlockManager, PrefixCachingBlockManager])
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_the_one_call_decode_step_decides_what_one_call_per_sequence_decides(
    manager: type, preemption: str
) -> None:
    """Slot for slot, preemption for preemption, over a workload that preempts often."""
    workload = random_workload(120, seed=3)
    kwargs: dict[str, Any] = {"watermark": 0, "preemption": preemption}
    if preemption == "swap":
        kwargs["num_host_blocks"] = 16
    fast = Scheduler(manager(200, 16), **kwargs)
    slow = Scheduler(_one_at_a_time(manager)(200, 16), **kwargs)
    pending = sorted(enumerate(workload), key=lambda ia: ia[1].step)
    preempted = 0
    for step in range(10_000):
        for sched in (fast, slow):
            for seq_id, a in pending:
                if a.step == step:
                    sched.add(Sequence.dummy(seq_id, a.prompt_len, a.max_new_tokens))
        outs = [fast.step(), slow.step()]
        assert _step_record(outs[0]) == _step_record(outs[1]), step
        preempted += len(outs[0].preempted)
        for out in outs:
            emit_tokens(out)
        if step > pending[-1][1].step and not (fast.running or fast.waiting):
            break
    assert preempted > 0  # the fallback path was exercised
    assert fast.bm.num_free == fast.bm.num_blocks


# --- a bad request never gets in; a failing block manager never loses one -------------------


def test_add_refuses_a_negative_token_id_and_changes_nothing() -> None:
    """A negative id used to be queued; step() then popped it, the block manager refused it,
    and every later step raised TokenNotAppended."""
    sched = Scheduler(BlockManager(8, 4), watermark=0)
    sched.add(Sequence.dummy(0, 3, 2))
    before = state(sched)
    with pytest.raises(InvalidRequest, match="-2"):
        sched.add(Sequence.from_prompt(1, [1, -2, 3], 2))
    assert state(sched) == before and not sched._held_by_block_manager(1)
    with pytest.raises(UnknownSequence):
        sched.sequence(1)
    run_until_idle(sched)  # the good request is served as if nothing happened
    assert sched.is_idle and sched.bm.num_free == 8


def test_append_token_refuses_a_negative_id() -> None:
    seq = Sequence.from_prompt(0, [1, 2], 3)
    for bad in (-1, True, 1.0):
        with pytest.raises(InvalidRequest):
            seq.append_token(bad)  # type: ignore[arg-type]
    assert seq.token_ids == [1, 2]


class FlakyHash:
    """A prefix-cache hash that raises while ``failing`` for blocks holding id 13."""

    failing = True

    def __call__(self, parent: int, tokens: list[int]) -> int:
        if self.failing and 13 in tokens:
            raise RuntimeError("the hash failed")
        return hash((parent, tuple(tokens)))


def test_a_step_whose_admission_fails_keeps_the_request_queued() -> None:
    """The block manager raises while admitting: the request stays at the head of waiting
    (it used to be popped first and lost, though still counted live), and nothing changed."""
    algo = FlakyHash()
    bm = PrefixCachingBlockManager(8, 2, hash_algo=algo)
    sched = Scheduler(bm, watermark=0)
    seq = Sequence.from_prompt(0, [13, 1, 2], 2)
    sched.add(seq)
    before = (state(sched), prefix_snapshot(bm))
    with pytest.raises(RuntimeError):
        sched.step()
    assert (state(sched), prefix_snapshot(bm)) == before
    assert sched.sequence(0) is seq and list(sched.waiting) == [seq]
    algo.failing = False
    out = sched.step()
    assert [p.seq for p in out.prefills] == [seq]
    emit_tokens(out)
    run_until_idle(sched)
    assert sched.is_idle and bm.num_free == 8


# --- a step's decodes are built when read, as they were at that step --------------------------


def test_decodes_read_late_are_the_slots_of_their_own_step() -> None:
    """A step's ``decodes`` read after later steps (that preempt, admit and retire) are what
    they were when the step ran: the same as another scheduler's, read at once."""
    workload = random_workload(40, seed=5, arrive_within=20)
    late, eager = (
        Scheduler(BlockManager(100, 16), watermark=0),
        Scheduler(BlockManager(100, 16), watermark=0),
    )
    kept: list[tuple[StepOutput, Any]] = []
    for step in range(2_000):
        for sched in (late, eager):
            for seq_id, a in enumerate(workload):
                if a.step == step:
                    sched.add(Sequence.dummy(seq_id, a.prompt_len, a.max_new_tokens))
        out_late, out_eager = late.step(), eager.step()
        record = [(d.seq.seq_id, d.slot) for d in out_eager.decodes]
        assert [s.seq_id for s in out_late.computed()] == [s.seq_id for s in out_eager.computed()]
        kept.append((out_late, record))
        emit_tokens(out_late)
        emit_tokens(out_eager)
        if late.is_idle and step > workload[-1].step:
            break
    assert any(out.preempted for out, _ in kept) and any(r for _, r in kept)
    for out, record in kept:
        decodes = out.decodes
        assert [(d.seq.seq_id, d.slot) for d in decodes] == record
        assert out.decodes is decodes  # built once


def test_step_output_keeps_the_dataclass_behaviour() -> None:
    """Built by keyword or position, compared by value, shown with every field; ``decodes``
    may be appended to or replaced, and ``computed()`` follows it."""
    seq = Sequence.dummy(0, 2, 2)
    empty = StepOutput()
    assert empty == StepOutput() and empty != StepOutput(finished=[seq])
    assert repr(empty) == (
        "StepOutput(prefills=[], decodes=[], preempted=[], finished=[], swapped_in=[], "
        "swap_out=[], swap_in=[])"
    )
    decodes = [Decode(seq, Slot(3, 1, None))]
    out = StepOutput([Prefill(seq, 2)], decodes)
    assert out.decodes is decodes and out.computed() == [seq, seq]
    assert out == StepOutput(prefills=[Prefill(seq, 2)], decodes=list(decodes))
    out.decodes = []
    assert out.computed() == [seq] and out != StepOutput([Prefill(seq, 2)], decodes)
    out.decodes.append(decodes[0])
    assert out.computed() == [seq, seq]
    with pytest.raises(TypeError):
        hash(out)


def test_a_one_call_step_and_its_built_decodes_agree() -> None:
    bm = BlockManager(16, 4)
    sched = Scheduler(bm, watermark=0)
    seqs = [Sequence.dummy(i, 4, 3) for i in range(3)]
    for seq in seqs:
        sched.add(seq)
    emit_tokens(sched.step())
    out = sched.step()
    assert out.computed() == seqs  # before decodes is read
    assert [d.seq for d in out.decodes] == seqs
    assert [(d.slot.block, d.slot.offset) for d in out.decodes] == [
        (bm.block_table(s.seq_id)[-1], 0) for s in seqs
    ]
    assert out.computed() == seqs  # after


# --- a step is all or nothing -----------------------------------------------------------------


def _faulty(manager: type) -> type:
    """``manager`` whose calls that change something are counted, and whose ``fail_at``-th
    call (counted from 0 since ``calls`` was last reset) raises before it does anything."""

    class Faulty(manager):  # type: ignore[misc, valid-type]
        calls = 0
        fail_at = -1

        def _count(self) -> None:
            n = self.calls
            self.calls = n + 1
            if n == self.fail_at:
                raise RuntimeError(f"injected failure at call {n}")

        def allocate(self, *args: Any, **kwargs: Any) -> Any:
            self._count()
            return super().allocate(*args, **kwargs)

        def append_slot(self, *args: Any) -> Any:
            self._count()
            return super().append_slot(*args)

        def append_slots(self, *args: Any) -> Any:
            self._count()
            return super().append_slots(*args)

        def free_seq(self, seq: Any) -> None:
            self._count()
            super().free_seq(seq)

    return Faulty


def _observed(sched: Scheduler, noted: bool = True) -> tuple[Any, ...]:
    """Everything a step may change: the queues, the sequences, and the block manager's
    tables (in their order), refcounts, free list, cache and counters. ``noted``: with each
    sequence's noted length (a copied sequence has none: its next step asks the manager)."""
    bm = sched.bm
    seqs = [*sched.running, *sched.waiting]
    kept: tuple[Any, ...] = ()
    if isinstance(bm, PrefixCachingBlockManager):
        kept = (prefix_snapshot(bm), bm.hit_blocks, bm.queried_blocks)
        kept += tuple((s, bm.token_ids(s)) for s in bm.sequences())
        # the interned prefix identities behind the hits, and their counts
        identities = sorted((p.ident, p.key, p.refs, p.block) for p in bm._idents.values())
        kept += (identities, bm._next_ident)
    return (
        [s.seq_id for s in sched.running],
        [s.seq_id for s in sched.waiting],
        sorted(sched._live),
        {s: list(blocks) for s, blocks in sched._swapped.items()},
        list(sched.host._free),
        [(s.seq_id, s._next_len if noted else None, list(s.token_ids)) for s in seqs],
        snapshot(bm),
        bm.sequences(),
        kept,
    )


def _shared_prefix_workload(seed: int) -> list[tuple[int, list[int], int]]:
    """(arrival step, prompt, max_new_tokens): prompts that start with one of two shared
    prefixes, so the prefix cache hits, evicts and revives."""
    rng = random.Random(seed)
    prefixes = [[1, 2, 3, 4, 5, 6, 7], [9, 8, 7, 6, 5]]
    return [
        (
            rng.randrange(20),
            rng.choice(prefixes) + [100 + i] * rng.randrange(1, 9),
            rng.randrange(1, 16),
        )
        for i in range(32)
    ]


@pytest.mark.parametrize("manager", [BlockManager, PrefixCachingBlockManager])
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_a_step_that_fails_at_any_call_changes_nothing(manager: type, preemption: str) -> None:
    """Every step of a workload that retires, decodes, preempts (one call per sequence) and
    admits several requests per step is tried with the block manager failing at each of its
    calls in turn: StepFailed, with everything as before the step, and the same state and the
    same steps after as a twin whose manager never failed."""
    workload = _shared_prefix_workload(seed=7)
    kwargs: dict[str, Any] = {"watermark": 1, "preemption": preemption}
    if preemption == "swap":
        kwargs["num_host_blocks"] = 6
    faulty = _faulty(manager)
    sched, twin = Scheduler(faulty(20, 4), **kwargs), Scheduler(faulty(20, 4), **kwargs)
    tried = admissions = preempting = copies = 0
    for step in range(500):
        for s in (sched, twin):
            for seq_id, (arrives, prompt, max_new) in enumerate(workload):
                if arrives == step:
                    s.add(Sequence.from_prompt(seq_id, prompt, max_new))
            if step % 4 == 1 and s.running and not s.running[0].is_finished:
                p = s.running[0]  # a shared tail: the next decode copies it
                s.fork(p, Sequence(1000 + step, list(p.token_ids), p.prompt_len, p.max_new_tokens))
        before = _observed(sched)
        assert before == _observed(twin)
        twin.bm.calls = 0
        out = twin.step()
        calls = twin.bm.calls
        for k in range(calls):
            sched.bm.calls, sched.bm.fail_at = 0, k
            with pytest.raises(StepFailed, match="injected failure") as info:
                sched.step()
            assert isinstance(info.value.__cause__, RuntimeError)
            assert _observed(sched) == before, (step, k)
            tried += 1
        sched.bm.fail_at = -1
        mine = sched.step()
        assert _step_record(mine) == _step_record(out), step
        admissions += len(out.prefills) > 1
        preempting += bool(out.preempted)
        copies += any(d.slot.cow_src is not None for d in out.decodes)
        emit_tokens(mine)
        emit_tokens(out)
        if step > 30 and twin.is_idle:
            break
    assert twin.is_idle and sched.is_idle and sched.bm.num_free == 20
    # the workload reached every kind of step: several admissions, preemptions, retirements
    assert admissions and preempting > 3 and copies and tried > 100


def test_a_sequence_changed_behind_the_schedulers_back_fails_the_step_and_changes_nothing() -> None:
    """A token id written into ``token_ids`` directly (not through ``append_token``) is refused
    by the block manager at the second admission of the step: the first is undone too."""
    bm = PrefixCachingBlockManager(16, 4)
    sched = Scheduler(bm, watermark=0)
    seqs = [Sequence.from_prompt(i, [i + 1] * 5, 3) for i in range(3)]
    for seq in seqs:
        sched.add(seq)
    seqs[1].token_ids[2] = -7
    before = _observed(sched)
    with pytest.raises(StepFailed, match="-7"):
        sched.step()
    assert _observed(sched) == before
    seqs[1].token_ids[2] = 2
    out = sched.step()
    assert [p.seq for p in out.prefills] == seqs


# --- copies of a scheduler ----------------------------------------------------------------------


@pytest.mark.parametrize("manager", ["plain", "sha256", "builtin"])
def test_a_deep_copy_and_an_unpickled_scheduler_step_on_as_the_original(manager: str) -> None:
    """In both builds (compiled, the scheduler, its sequences, its host pool and its block
    manager are native classes with no ``__dict__``): copies taken mid-run, with sequences
    running, waiting and swapped out, decide every later step as the original does."""
    bm = (
        BlockManager(20, 4)
        if manager == "plain"
        else PrefixCachingBlockManager(20, 4, hash_algo=manager)
    )
    workload = _shared_prefix_workload(seed=11)
    sched = Scheduler(bm, watermark=1, preemption="swap", num_host_blocks=6)

    def arrive(s: Scheduler, step: int) -> None:
        for seq_id, (arrives, prompt, max_new) in enumerate(workload):
            if arrives == step:
                s.add(Sequence.from_prompt(seq_id, prompt, max_new))

    step = 0
    while not (sched._swapped and sched.running and sched.waiting):
        arrive(sched, step)
        emit_tokens(sched.step())
        step += 1
    copies = [copy.deepcopy(sched), pickle.loads(pickle.dumps(sched))]
    assert all(_observed(c, noted=False) == _observed(sched, noted=False) for c in copies)
    assert all(c.bm is not sched.bm and c.host is not sched.host for c in copies)
    while not (sched.is_idle and step > 20):
        outs = []
        for s in (sched, *copies):
            arrive(s, step)
            outs.append(s.step())
            emit_tokens(outs[-1])
        assert _step_record(outs[1]) == _step_record(outs[0]) == _step_record(outs[2]), step
        seen = [_observed(s, noted=False) for s in (sched, *copies)]
        assert seen[1] == seen[0] == seen[2], step
        step += 1
    assert all(c.is_idle and c.bm.num_free == 20 for c in copies)
