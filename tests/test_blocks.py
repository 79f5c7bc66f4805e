"""The reference block manager: the seed's worked example, typed errors, and the model check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from servelab.kv.blocks import (
    BlockManager,
    InvalidBlock,
    InvalidConfig,
    InvalidLength,
    InvalidSequenceId,
    KVCacheError,
    OutOfBlocks,
    SequenceExists,
    Slot,
    UnknownSequence,
)
from servelab.testing.block_manager import (
    block_manager_machine,
    check_block_manager_invariants,
    snapshot,
)
from servelab.testing.core import InvariantViolation, thoroughness


def test_seed_fork_example_first_writer_copies_second_writes_in_place() -> None:
    bm = BlockManager(8, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    full, partial = bm.block_table(0)
    block, offset, src = bm.append_slot(0)
    assert (offset, src) == (2, partial) and block not in (full, partial)
    assert bm.refcount(partial) == 1 and bm.refcount(full) == 2
    assert bm.append_slot(1) == Slot(partial, 2, None)
    assert bm.block_table(1) == [full, partial] and bm.block_table(0) == [full, block]
    check_block_manager_invariants(bm)


def test_blocks_are_allocated_only_on_boundary_crossings() -> None:
    bm = BlockManager(4, 4)
    bm.allocate(0, 0)
    seen = []
    for _ in range(9):
        before = bm.num_free
        slot = bm.append_slot(0)
        seen.append(before - bm.num_free)
        assert slot.cow_src is None
    assert seen == [1, 0, 0, 0, 1, 0, 0, 0, 1]
    assert bm.seq_len(0) == 9 and len(bm.block_table(0)) == 3


def test_free_list_is_fifo_and_free_seq_returns_blocks() -> None:
    bm = BlockManager(4, 2)
    bm.allocate(0, 3)
    assert bm.free_list() == [2, 3]
    bm.free_seq(0)
    assert bm.free_list() == [2, 3, 1, 0]  # the tail is released first
    assert bm.sequences() == [] and bm.num_free == 4


def test_full_blocks_stay_shared_after_fork() -> None:
    bm = BlockManager(8, 4)
    bm.allocate(0, 8)
    bm.fork(0, 1)
    slot = bm.append_slot(1)
    assert slot.cow_src is None and slot.offset == 0
    assert [bm.refcount(b) for b in bm.block_table(0)] == [2, 2]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda bm: bm.allocate(0, 1), SequenceExists),
        (lambda bm: bm.allocate(5, -1), InvalidLength),
        (lambda bm: bm.allocate(5, 2.0), InvalidLength),
        (lambda bm: bm.allocate(5, 100), OutOfBlocks),
        (lambda bm: bm.append_slot(9), UnknownSequence),
        (lambda bm: bm.append_slot("0"), InvalidSequenceId),
        (lambda bm: bm.append_slot(0.0), InvalidSequenceId),
        (lambda bm: bm.allocate(True, 3), InvalidSequenceId),
        (lambda bm: bm.fork(0, "7"), InvalidSequenceId),
        (lambda bm: bm.free_seq(None), InvalidSequenceId),
        (lambda bm: bm.seq_len(b"0"), InvalidSequenceId),
        (lambda bm: bm.allocate(5, [1, -1]), InvalidLength),
        (lambda bm: bm.allocate(5, [1, True]), InvalidLength),
        (lambda bm: bm.allocate(5, "ab"), InvalidLength),
        (lambda bm: bm.append_slot(0, -1), InvalidLength),
        (lambda bm: bm.fork(9, 5), UnknownSequence),
        (lambda bm: bm.fork(0, 1), SequenceExists),
        (lambda bm: bm.fork(0, 0), SequenceExists),
        (lambda bm: bm.free_seq(9), UnknownSequence),
        (lambda bm: bm.refcount(99), InvalidBlock),
        (lambda bm: bm.blocks_needed(-3), InvalidLength),
        (lambda bm: bm.seq_len(9), UnknownSequence),
    ],
)
def test_bad_calls_raise_typed_errors_and_change_nothing(call: Any, error: type) -> None:
    bm = BlockManager(4, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    before = snapshot(bm)
    with pytest.raises(error) as caught:
        call(bm)
    assert isinstance(caught.value, KVCacheError)
    assert str(caught.value)  # an actionable message, not a bare class
    assert snapshot(bm) == before


def test_out_of_blocks_during_copy_on_write_changes_nothing() -> None:
    bm = BlockManager(2, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    before = snapshot(bm)
    with pytest.raises(OutOfBlocks):
        bm.append_slot(0)
    assert snapshot(bm) == before
    bm.free_seq(1)
    assert bm.append_slot(0).cow_src is None  # the sole holder now writes in place


def test_errors_are_catchable_as_builtin_families() -> None:
    assert issubclass(OutOfBlocks, MemoryError) and issubclass(UnknownSequence, KeyError)
    assert issubclass(SequenceExists, ValueError) and issubclass(InvalidLength, ValueError)


@pytest.mark.parametrize("args", [(0, 4), (4, 0), (-1, 4), (True, 4), (4, 2.5)])
def test_constructor_rejects_bad_sizes(args: tuple[Any, Any]) -> None:
    with pytest.raises(InvalidConfig):
        BlockManager(*args)


def test_check_invariants_catches_a_corrupted_manager() -> None:
    bm = BlockManager(4, 2)
    bm.allocate(0, 3)
    bm._ref[bm.block_table(0)[0]] = 2  # a refcount that no table explains
    with pytest.raises(InvariantViolation) as caught:
        check_block_manager_invariants(bm)
    assert caught.value.invariant == "refcount-matches-tables"
    bm = BlockManager(4, 2)
    bm.allocate(0, 3)
    bm._free.append(bm._free[0])  # one block on the free list twice
    with pytest.raises(InvariantViolation, match="twice"):
        check_block_manager_invariants(bm)


def test_state_machine_against_the_model() -> None:
    """Random allocate/append/fork/free and invalid calls; >= 100k operations when thorough."""
    base = block_manager_machine(BlockManager)
    counted = {"ops": 0}

    class Counting(base):  # type: ignore[misc, valid-type]
        call_timeout = 60.0  # generous: a loaded CI box must never look hung

        def do(self, code: str, fn: Any) -> Any:
            counted["ops"] += 1
            return super().do(code, fn)

    scale = thoroughness()
    # dev: a few thousand operations in seconds; thorough (CI): at least 100,000
    examples, minimum = (120 * scale, 100_000) if scale > 1 else (30, 2_500)
    run_state_machine_as_test(
        Counting,
        settings=settings(settings(), max_examples=examples, stateful_step_count=200),
    )
    print(f"{counted['ops']} operations")
    assert counted["ops"] >= minimum


def test_a_non_int_sequence_id_is_named_as_such_not_as_unknown() -> None:
    bm = BlockManager(4, 4)
    bm.allocate(0, 2)
    with pytest.raises(InvalidSequenceId, match="sequence ids are ints, got str '0'"):
        bm.append_slot("0")  # type: ignore[arg-type]
    assert issubclass(InvalidSequenceId, TypeError)
    assert not issubclass(InvalidSequenceId, UnknownSequence)


def test_allocate_takes_a_count_or_the_token_ids() -> None:
    by_count, by_ids = BlockManager(8, 4), BlockManager(8, 4)
    assert by_count.allocate(0, 6) == 0
    assert by_ids.allocate(0, [7, 7, 7, 1, 2, 3]) == 0  # nothing is cached here
    assert snapshot(by_count) == snapshot(by_ids)
    assert by_count.append_slot(0) == by_ids.append_slot(0, 5)
    assert snapshot(by_count) == snapshot(by_ids)


def test_fork_and_copy_on_write_are_written_once_for_both_managers() -> None:
    from servelab.kv.blocks import BlockTables
    from servelab.kv.prefix import PrefixCachingBlockManager

    for name in ("fork", "free_seq", "block_table", "refcount", "_grow_or_copy"):
        assert getattr(BlockManager, name) is getattr(BlockTables, name), name
        assert getattr(PrefixCachingBlockManager, name) is getattr(BlockTables, name), name
