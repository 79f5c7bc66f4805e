"""The reference prefix-caching block manager: reuse, the evictable LRU, verification, errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import servelab.kv.prefix as prefix_module
from servelab.kv.blocks import InvalidLength, OutOfBlocks, SequenceExists, UnknownSequence
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.testing.core import thoroughness
from servelab.testing.prefix_cache import (
    check_prefix_invariants,
    prefix_cache_machine,
    prefix_snapshot,
)


def test_equal_prompts_share_full_blocks_and_cap_at_len_minus_one() -> None:
    bm = PrefixCachingBlockManager(8, 4)
    assert bm.allocate(0, list(range(10))) == 0
    assert bm.num_cached_tokens(list(range(10))) == 8
    assert bm.allocate(1, list(range(10))) == 8
    assert bm.block_table(0)[:2] == bm.block_table(1)[:2]
    assert bm.allocate(2, list(range(8))) == 4  # 8 tokens: one block, so the last is computed
    assert bm.allocate(3, [5]) == 0
    check_prefix_invariants(bm)


def test_freed_blocks_stay_cached_and_are_evicted_lazily_tail_first() -> None:
    bm = PrefixCachingBlockManager(4, 2)
    bm.allocate(0, [1, 2, 3, 4, 5])  # blocks: [1,2] [3,4] hashed, [5] partial
    full = bm.block_table(0)[:2]
    bm.free_seq(0)
    assert bm.evictable() == [full[1], full[0]]  # the tail goes first
    assert bm.num_free == 4 and bm.num_cached == 2
    bm.allocate(1, [9, 9])  # takes a plain free block; the cache survives
    assert bm.num_cached_tokens([1, 2, 3, 4, 5]) == 4
    bm.allocate(2, [8, 8, 8])  # needs 2: the last plain one, then evicts the tail [3, 4]
    assert bm.num_cached_tokens([1, 2, 3, 4, 5]) == 2
    assert bm.evictable() == [full[0]]
    check_prefix_invariants(bm)


def test_a_hit_on_an_evictable_block_revives_it() -> None:
    bm = PrefixCachingBlockManager(3, 2)
    bm.allocate(0, [1, 2, 3])
    bm.free_seq(0)
    assert bm.allocate(1, [1, 2, 7]) == 2
    assert bm.evictable() == [] and bm.refcount(bm.block_table(1)[0]) == 1
    check_prefix_invariants(bm)


def test_blocks_filled_by_decoding_are_cached() -> None:
    bm = PrefixCachingBlockManager(8, 2)
    bm.allocate(0, [1])
    bm.append_slot(0, 2)
    assert bm.block_hash(bm.block_table(0)[0]) is not None
    assert bm.allocate(1, [1, 2, 3]) == 2


def test_fork_then_copy_on_write_of_the_partial_tail() -> None:
    bm = PrefixCachingBlockManager(8, 4)
    bm.allocate(0, list(range(6)))
    bm.fork(0, 1)
    _full, partial = bm.block_table(0)
    slot = bm.append_slot(0, 6)
    assert slot.cow_src == partial and slot.block != partial
    assert bm.append_slot(1, 9) == (partial, 2, None)
    assert bm.token_ids(1) == [0, 1, 2, 3, 4, 5, 9]
    check_prefix_invariants(bm)


def test_a_hash_collision_never_serves_wrong_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefix_module, "chain_hash", lambda parent, tokens: 7)
    bm = PrefixCachingBlockManager(8, 2)
    bm.allocate(0, [1, 2, 3])
    assert bm.num_cached_tokens([4, 5, 6]) == 0  # same (forced) hash, other tokens
    assert bm.allocate(1, [4, 5, 6]) == 0
    assert bm.allocate(2, [1, 2, 3]) == 2
    check_prefix_invariants(bm)


def test_out_of_blocks_counts_hits_and_changes_nothing() -> None:
    bm = PrefixCachingBlockManager(4, 2)
    bm.allocate(0, [1, 2, 3, 4, 5])
    assert not bm.can_allocate([6, 6, 6])
    before = prefix_snapshot(bm)
    with pytest.raises(OutOfBlocks):
        bm.allocate(1, [6, 6, 6])
    assert prefix_snapshot(bm) == before
    assert bm.can_allocate([1, 2, 3, 4, 9])  # two blocks hit, so one new block fits
    bm.free_seq(0)
    assert bm.allocate(1, [1, 2, 3, 4, 9, 9, 9]) == 4


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda bm: bm.allocate(0, [1]), SequenceExists),
        (lambda bm: bm.allocate(5, [1, -2]), InvalidLength),
        (lambda bm: bm.allocate(5, "abc"), InvalidLength),
        (lambda bm: bm.append_slot(9, 1), UnknownSequence),
        (lambda bm: bm.append_slot(0, -1), InvalidLength),
        (lambda bm: bm.fork(0, 0), SequenceExists),
        (lambda bm: bm.free_seq(9), UnknownSequence),
    ],
)
def test_bad_calls_raise_typed_errors_and_change_nothing(call: Any, error: type) -> None:
    bm = PrefixCachingBlockManager(4, 2)
    bm.allocate(0, [1, 2, 3])
    before = prefix_snapshot(bm)
    with pytest.raises(error):
        call(bm)
    assert prefix_snapshot(bm) == before


def test_state_machine_against_the_rules() -> None:
    machine = prefix_cache_machine(PrefixCachingBlockManager)
    machine.call_timeout = 60.0  # generous: a loaded CI box must never look hung
    scale = thoroughness()
    run_state_machine_as_test(
        machine, settings=settings(settings(), max_examples=40 * scale, stateful_step_count=60)
    )
