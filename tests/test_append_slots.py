"""``append_slots``: one decode step in one call, the same slots as ``append_slot`` one by one."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servelab.kv.blocks import (
    BlockManager,
    InvalidLength,
    InvalidSequenceId,
    KVCacheError,
    OutOfBlocks,
    RepeatedInStep,
    StepSlots,
    UnknownSequence,
)
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.testing.block_manager import snapshot
from servelab.testing.prefix_cache import check_prefix_cache_invariants, prefix_snapshot

MANAGERS = [BlockManager, PrefixCachingBlockManager]


def observe(bm: Any) -> tuple[Any, ...]:
    """Everything observable of either manager, lengths included."""
    lengths = tuple(bm.seq_len(s) for s in bm.sequences())
    if isinstance(bm, PrefixCachingBlockManager):
        return (prefix_snapshot(bm), lengths, tuple(bm.token_ids(s) for s in bm.sequences()))
    return (snapshot(bm), lengths)


PROGRAMS = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "fork", "free", "step"]),
        st.integers(0, 7),  # a sequence id
        st.lists(st.integers(0, 2), max_size=6),  # tokens (a prompt, or one per step member)
        st.randoms(use_true_random=False),
    ),
    max_size=30,
)


@pytest.mark.parametrize("manager", MANAGERS, ids=["plain", "prefix"])
@given(num_blocks=st.integers(1, 10), block_size=st.integers(1, 3), program=PROGRAMS)
@settings(max_examples=200, deadline=None)
def test_a_step_is_append_slot_for_each_sequence_in_order(
    manager: Any, num_blocks: int, block_size: int, program: Any
) -> None:
    """Against a twin driven one ``append_slot`` at a time: equal slots, copies and state
    when the step fits; when it does not, OutOfBlocks and no change at all, and the twin
    runs out of blocks somewhere in the same step."""
    batched = manager(num_blocks, block_size)
    single = manager(num_blocks, block_size)
    live: list[int] = []
    steps_refused = 0
    for op, seq, tokens, rnd in program:
        if op == "allocate" and seq not in live:
            try:
                batched.allocate(seq, tokens)
            except OutOfBlocks:
                continue
            single.allocate(seq, tokens)
            live.append(seq)
        elif op == "fork" and live and seq not in live:
            parent = rnd.choice(live)
            batched.fork(parent, seq)
            single.fork(parent, seq)
            live.append(seq)
        elif op == "free" and seq in live:
            batched.free_seq(seq)
            single.free_seq(seq)
            live.remove(seq)
        elif op == "step":
            members = rnd.sample(live, rnd.randint(0, len(live)))
            ids = [rnd.randrange(3) for _ in members]
            before = observe(batched)
            try:
                got = batched.append_slots(members, ids)
            except OutOfBlocks:
                steps_refused += 1
                assert observe(batched) == before
                with pytest.raises(OutOfBlocks):
                    for member, token in zip(members, ids, strict=True):
                        single.append_slot(member, token)
                single = copy.deepcopy(batched)  # the twin's partial step is thrown away
                continue
            want = [single.append_slot(m, t) for m, t in zip(members, ids, strict=True)]
            assert isinstance(got, StepSlots)
            assert got.slots == [w.block * block_size + w.offset for w in want]
            assert got.copies == [(w.cow_src, w.block) for w in want if w.cow_src is not None]
        assert observe(batched) == observe(single)
        if isinstance(batched, PrefixCachingBlockManager):
            check_prefix_cache_invariants(batched)


def test_the_last_holder_of_a_shared_tail_writes_in_place_in_one_step() -> None:
    """Three holders of one partial tail in one step: the first two copy it, the last
    writes in place, as three ``append_slot`` calls would."""
    bm = PrefixCachingBlockManager(4, 4)
    bm.allocate(0, [1, 2, 3, 4, 5])  # a full block and a partial tail
    bm.fork(0, 1)
    bm.fork(0, 2)
    tail = bm.block_table(0)[-1]
    step = bm.append_slots([0, 1, 2], [7, 8, 9])
    assert len(step.copies) == 2 and all(src == tail for src, _ in step.copies)
    assert bm.block_table(2)[-1] == tail  # the last writer kept the original
    assert step.slots[2] == tail * 4 + 1
    assert bm.refcount(tail) == 1 and bm.num_free == 0


def test_a_step_that_fits_only_because_the_last_holder_writes_in_place() -> None:
    bm = BlockManager(3, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    assert bm.num_free == 1  # one copy needed for two holders: it fits exactly
    step = bm.append_slots([0, 1])
    assert len(step.copies) == 1 and bm.num_free == 0


def test_out_of_blocks_names_the_step_and_changes_nothing() -> None:
    bm = PrefixCachingBlockManager(3, 2)
    bm.allocate(0, [1, 2])
    bm.allocate(1, [3, 4])
    bm.allocate(2, [5])  # the last free block
    before = observe(bm)
    with pytest.raises(OutOfBlocks, match="2 new blocks, only 0"):
        bm.append_slots([0, 1, 2], [6, 6, 6])  # 0 and 1 sit at a block boundary
    assert observe(bm) == before
    assert bm.append_slots([2], [6]).slots == [bm.block_table(2)[0] * 2 + 1]


@pytest.mark.parametrize("manager", MANAGERS, ids=["plain", "prefix"])
@pytest.mark.parametrize(
    ("seqs", "tokens", "error"),
    [
        ([0, 0], [1, 1], RepeatedInStep),
        ([0, 9], [1, 1], UnknownSequence),
        ([0, True], [1, 1], InvalidSequenceId),
        ([0, 1.0], [1, 1], InvalidSequenceId),
        ("01", [1, 1], InvalidSequenceId),
        (5, [1], InvalidSequenceId),
        ([0, 1], [1], InvalidLength),
        ([0, 1], [1, -1], InvalidLength),
        ([0, 1], [1, 2.5], InvalidLength),
        ([0, 1], "ab", InvalidLength),
    ],
)
def test_bad_steps_raise_typed_errors_and_change_nothing(
    manager: Any, seqs: Any, tokens: Any, error: type
) -> None:
    bm = manager(8, 2)
    bm.allocate(0, [1, 2, 3])
    bm.allocate(1, [4])
    before = observe(bm)
    with pytest.raises(error) as caught:
        bm.append_slots(seqs, tokens)
    assert isinstance(caught.value, KVCacheError)
    assert str(caught.value)
    assert observe(bm) == before


def test_the_prefix_manager_needs_the_token_ids() -> None:
    bm = PrefixCachingBlockManager(4, 2)
    bm.allocate(0, [1])
    with pytest.raises(InvalidLength, match="token_ids is required"):
        bm.append_slots([0], None)  # type: ignore[arg-type]


@pytest.mark.parametrize("manager", MANAGERS, ids=["plain", "prefix"])
def test_an_empty_step_is_nothing(manager: Any) -> None:
    bm = manager(2, 2)
    bm.allocate(0, [1])
    before = observe(bm)
    assert bm.append_slots([], []) == StepSlots([], [])
    assert observe(bm) == before


def test_blocks_filled_in_a_step_enter_the_cache() -> None:
    bm = PrefixCachingBlockManager(8, 2)
    bm.allocate(0, [1])
    bm.allocate(1, [1])
    bm.append_slots([0, 1], [2, 2])  # both fill [1, 2]: one is cached, its twin is private
    assert bm.num_cached == 1
    bm.free_seq(0)
    bm.free_seq(1)
    assert bm.allocate(2, [1, 2, 3]) == 2
