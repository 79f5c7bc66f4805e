"""The reference prefix-caching block manager: reuse, the evictable LRU, verification, errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from servelab.kv.blocks import (
    InvalidConfig,
    InvalidLength,
    InvalidSequenceId,
    OutOfBlocks,
    SequenceExists,
    UnknownSequence,
)
from servelab.kv.prefix import (
    InvalidBlockHash,
    InvalidExtraKey,
    PrefixCachingBlockManager,
    builtin_chain,
    root_hash,
    sha256_chain,
)
from servelab.testing.core import thoroughness
from servelab.testing.prefix_cache import (
    check_prefix_cache_invariants,
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
    check_prefix_cache_invariants(bm)


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
    check_prefix_cache_invariants(bm)


def test_a_hit_on_an_evictable_block_revives_it() -> None:
    bm = PrefixCachingBlockManager(3, 2)
    bm.allocate(0, [1, 2, 3])
    bm.free_seq(0)
    assert bm.allocate(1, [1, 2, 7]) == 2
    assert bm.evictable() == [] and bm.refcount(bm.block_table(1)[0]) == 1
    check_prefix_cache_invariants(bm)


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
    check_prefix_cache_invariants(bm)


def test_a_hash_collision_never_serves_wrong_tokens() -> None:
    bm = PrefixCachingBlockManager(8, 2, hash_algo=lambda parent, tokens: 7)
    bm.allocate(0, [1, 2, 3])
    assert bm.num_cached_tokens([4, 5, 6]) == 0  # same (forced) hash, other tokens
    assert bm.allocate(1, [4, 5, 6]) == 0
    assert bm.allocate(2, [1, 2, 3]) == 2
    check_prefix_cache_invariants(bm)


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
        (lambda bm: bm.allocate("5", [1]), InvalidSequenceId),
        (lambda bm: bm.append_slot(None, 1), InvalidSequenceId),
        (lambda bm: bm.fork(0, 1.5), InvalidSequenceId),
        (lambda bm: bm.allocate(5, [1, 2.0]), InvalidLength),
        (lambda bm: bm.allocate(5, [1], extra_key=3), InvalidExtraKey),
    ],
)
def test_bad_calls_raise_typed_errors_and_change_nothing(call: Any, error: type) -> None:
    bm = PrefixCachingBlockManager(4, 2)
    bm.allocate(0, [1, 2, 3])
    before = prefix_snapshot(bm)
    with pytest.raises(error):
        call(bm)
    assert prefix_snapshot(bm) == before


M = 2**61 - 1  # hash(M) == hash(0): Python's int hash collides by design


@pytest.mark.parametrize("algo", ["sha256", "builtin"])
def test_a_hit_must_continue_the_chain_the_issue_repro(algo: Any) -> None:
    """Seq 1's block for token 5 was computed after M; seq 2's prefix is 0. Under the builtin
    hash both parents hash alike, so only the parent-block check refuses the hit."""
    bm = PrefixCachingBlockManager(16, 1, hash_algo=algo)
    bm.allocate(0, [0, 9])
    bm.allocate(1, [M, 5, 9])
    assert bm.allocate(2, [0, 5, 9]) == 1  # the block of 0 only, not seq 1's block of 5
    assert bm.block_table(2)[1] != bm.block_table(1)[1]
    check_prefix_cache_invariants(bm)


def test_the_default_constructor_refuses_the_repro() -> None:
    bm = PrefixCachingBlockManager(16, 1)
    bm.allocate(0, [0, 9])
    bm.allocate(1, [M, 5, 9])
    assert bm.allocate(2, [0, 5, 9]) == 1
    assert bm.hash_algo == "sha256"


def test_a_block_whose_parent_was_recycled_is_never_hit() -> None:
    """Every block hashes alike: after the parent is evicted and reused for other tokens,
    its old child still carries matching tokens but must not be served."""
    bm = PrefixCachingBlockManager(3, 1, hash_algo=lambda parent, tokens: 0)
    bm.allocate(0, [1, 2, 3])  # blocks [1] [2] cached (one hash: only [1] registers)
    bm.free_seq(0)
    bm.allocate(1, [4, 2, 3])
    bm.free_seq(1)
    assert bm.allocate(2, [4, 2, 5]) <= 2
    check_prefix_cache_invariants(bm)


def test_a_twins_child_is_cached_and_chains_after_its_parent_is_recomputed() -> None:
    """A prompt of one block computes a private twin of the cached block; the block that
    decoding fills after the twin continues the same whole prefix, so it is cached and
    serves every sequence with that prefix, even after the original parent was evicted and
    an equal one computed again."""
    bm = PrefixCachingBlockManager(4, 1)
    bm.allocate(0, [0])
    bm.allocate(1, [0])  # capped: a twin of seq 0's block, not a hit
    bm.append_slot(1, 3)
    assert bm.num_cached_tokens([0, 3, 5]) == 2
    bm.free_seq(0)
    bm.allocate(2, [5, 5])  # takes the last plain block, then evicts seq 0's block of 0
    assert bm.num_cached_tokens([0, 3, 5]) == 0
    bm.free_seq(2)
    bm.free_seq(1)  # the block of 3 stays cached; the twin is private, so plain free
    assert bm.allocate(3, [0, 3, 5]) == 0
    assert bm.num_cached_tokens([0, 3, 9]) == 2  # the new block of 0 chains to the old 3
    check_prefix_cache_invariants(bm)


def test_extra_keys_separate_namespaces() -> None:
    bm = PrefixCachingBlockManager(16, 2)
    bm.allocate(0, [1, 2, 3], extra_key="tenant-a")
    assert bm.num_cached_tokens([1, 2, 3]) == 0
    assert bm.num_cached_tokens([1, 2, 3], extra_key=b"tenant-a") == 2
    assert bm.allocate(1, [1, 2, 3], extra_key="tenant-b") == 0
    assert bm.allocate(2, [1, 2, 3], extra_key="tenant-a") == 2
    bm.append_slot(2, 4)  # the second block fills: chained under tenant-a's root
    assert bm.num_cached_tokens([1, 2, 3, 4, 5], extra_key="tenant-a") == 4
    assert bm.num_cached_tokens([1, 2, 3, 4, 5]) == 0


def test_hash_algos_agree_on_hits() -> None:
    trace = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 9], [1, 2, 7], [1, 2, 3, 4, 5, 6, 7]]
    results = []
    for algo in ("sha256", "builtin"):
        bm = PrefixCachingBlockManager(32, 2, hash_algo=algo)
        results.append([bm.allocate(i, t) for i, t in enumerate(trace)])
    assert results[0] == results[1] == [0, 4, 2, 4]


def test_token_ids_beyond_64_bits_hash_unambiguously() -> None:
    bm = PrefixCachingBlockManager(8, 2)
    bm.allocate(0, [2**64, 1, 0])
    assert bm.num_cached_tokens([2**64, 1, 0]) == 2
    assert bm.num_cached_tokens([0, 1, 0]) == 0


@pytest.mark.parametrize("algo", ["sha256", "builtin"])
def test_a_prompt_with_a_huge_id_still_hits_its_ordinary_blocks(algo: Any) -> None:
    """Block keys are packed ids unless a block holds an id of 2**64 or above; a prompt
    with such an id elsewhere must key its ordinary blocks as everybody else does."""
    bm = PrefixCachingBlockManager(8, 2, hash_algo=algo)
    bm.allocate(0, [1, 2, 3, 4, 5])
    assert bm.allocate(1, [1, 2, 3, 4, 2**70]) == 4
    bm.allocate(2, [1, 2, 2**70, 7, 8])
    assert bm.num_cached_tokens([1, 2, 2**70, 7, 9]) == 4
    assert bm.block_tokens(bm.block_table(2)[1]) == [2**70, 7]
    assert bm.block_tokens(bm.block_table(0)[1]) == [3, 4]
    names = sha256_chain if algo == "sha256" else builtin_chain
    assert [bm.block_hash(b) for b in bm.block_table(2)[:2]] == names(
        root_hash(b""), [1, 2, 2**70, 7], 2
    )


@pytest.mark.parametrize(
    ("algo", "chain"),
    [("sha256", sha256_chain), ("builtin", builtin_chain)],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_block_names_are_the_public_chain_of_the_whole_prefix(algo: Any, chain: Any) -> None:
    """Names are computed once per prefix (hits never hash); they are still the chain the
    public functions compute, and a block's name depends on its prefix only."""
    bm = PrefixCachingBlockManager(16, 2, hash_algo=algo)
    bm.allocate(0, [5, 6, 7, 8, 9])
    bm.append_slot(0, 10)  # the third block fills and is named
    assert [bm.block_hash(b) for b in bm.block_table(0)] == chain(
        root_hash(b""), [5, 6, 7, 8, 9, 10], 2
    )
    assert bm.allocate(1, [5, 6, 2**64, 1, 0]) == 2  # a huge id later leaves block 0 alone
    assert bm.cached() == {bm.block_hash(b): b for b in bm.cached().values()}
    assert (
        sha256_chain(1, [2**64, 1, 0, 3], 2)[1]
        == sha256_chain(sha256_chain(1, [2**64, 1], 2)[0], [0, 3], 2)[0]
    )


def test_a_bad_hash_algo_is_refused() -> None:
    with pytest.raises(InvalidConfig):
        PrefixCachingBlockManager(8, 2, hash_algo="md5")  # type: ignore[arg-type]


def _colliding(parent: int, tokens: list[int]) -> int:
    return (parent + tokens[0]) % 3  # collides on purpose, and often


OPS = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "append", "free", "fork"]),
        st.integers(0, 5),  # a sequence id
        st.lists(st.sampled_from([0, 1, M]), min_size=1, max_size=7),  # tokens
    ),
    max_size=40,
)


@pytest.mark.parametrize(
    "algo", [_colliding, "builtin", "sha256"], ids=["colliding", "builtin", "sha256"]
)
@given(ops=OPS)
@settings(max_examples=150, deadline=None)
def test_every_cached_block_holds_the_sequences_whole_prefix(algo: Any, ops: Any) -> None:
    """A shadow KV memory where slot ``p`` of a sequence holds its whole prefix up to ``p``
    (what real KV depends on). Hits are not rewritten, so a wrong hit shows as wrong data."""
    size = 2
    bm = PrefixCachingBlockManager(12, size, hash_algo=algo)
    kv: dict[int, list[tuple[int, ...] | None]] = {b: [None] * size for b in range(12)}
    tokens: dict[int, list[int]] = {}
    for op, seq, ids in ops:
        try:
            if op == "allocate" and seq not in tokens:
                cached = bm.allocate(seq, ids)
                tokens[seq] = list(ids)
                table = bm.block_table(seq)
                for p in range(cached, len(ids)):
                    kv[table[p // size]][p % size] = tuple(ids[: p + 1])
            elif op == "append" and seq in tokens:
                slot = bm.append_slot(seq, ids[0])
                if slot.cow_src is not None:
                    kv[slot.block] = list(kv[slot.cow_src])
                tokens[seq].append(ids[0])
                kv[slot.block][slot.offset] = tuple(tokens[seq])
            elif op == "free" and seq in tokens:
                bm.free_seq(seq)
                del tokens[seq]
            elif op == "fork" and seq in tokens and seq + 6 not in tokens:
                bm.fork(seq, seq + 6)
                tokens[seq + 6] = list(tokens[seq])
        except OutOfBlocks:
            continue
        check_prefix_cache_invariants(bm)
        for s, toks in tokens.items():
            table = bm.block_table(s)
            for p in range(len(toks)):
                assert kv[table[p // size]][p % size] == tuple(toks[: p + 1]), (s, p)
        for block in bm.cached().values():  # a cached block's tokens end its own prefix
            stored = bm.block_tokens(block)
            assert stored is not None
            assert [kv[block][j][-1] for j in range(size)] == stored  # type: ignore[index]
    for seq in list(tokens):
        bm.free_seq(seq)
    bm.allocate(99, [0] * (12 * size))  # reclaims every block: no older identity may live on
    assert len(bm._idents) == 12


def test_state_machine_against_the_rules() -> None:
    machine = prefix_cache_machine(PrefixCachingBlockManager)
    machine.call_timeout = 60.0  # generous: a loaded CI box must never look hung
    scale = thoroughness()
    run_state_machine_as_test(
        machine, settings=settings(settings(), max_examples=40 * scale, stateful_step_count=60)
    )


# --- a hash_algo callable that fails: refused before anything changes --------------------------
BAD = 13  # a block holding this id makes the hash below fail


class FailingHash:
    """A hash that raises, or returns ``result``, for any block holding ``BAD``."""

    def __init__(self, result: object = None, raises: bool = False) -> None:
        self.result, self.raises = result, raises

    def __call__(self, parent: int, tokens: list[int]) -> Any:
        if BAD in tokens:
            if self.raises:
                raise RuntimeError("the hash failed")
            return self.result
        return hash((parent, tuple(tokens)))


def deep_snapshot(bm: PrefixCachingBlockManager) -> tuple[Any, ...]:
    """``prefix_snapshot``, each sequence's token ids and every interned identity."""
    idents = sorted((repr(key), p.refs, p.block, repr(p.name)) for key, p in bm._idents.items())
    tokens = tuple((s, tuple(bm.token_ids(s))) for s in sorted(bm.sequences()))
    return (prefix_snapshot(bm), tokens, tuple(idents))


def _populated(algo: FailingHash) -> PrefixCachingBlockManager:
    """Two cached blocks in use (seq 0; fork 3 shares them and the partial tail), a cached
    evictable block, a plain free one and an unused one."""
    bm = PrefixCachingBlockManager(6, 2, hash_algo=algo)
    bm.allocate(0, [1, 2, 3, 4, 5])
    bm.allocate(1, [7, 7, 8])
    bm.free_seq(1)
    bm.fork(0, 3)
    return bm


def _no_setup(bm: PrefixCachingBlockManager) -> None:
    pass


def _drop_fork(bm: PrefixCachingBlockManager) -> None:
    bm.free_seq(3)


CALLS: dict[str, tuple[Any, Any]] = {
    # hits two blocks, then names a new full block holding BAD (evicting for the third block)
    "allocate": (_no_setup, lambda bm: bm.allocate(2, [1, 2, 3, 4, BAD, 14, 15, 16, 17])),
    # revives the evictable block, then names one holding BAD
    "allocate-revive": (_no_setup, lambda bm: bm.allocate(2, [7, 7, BAD, 14, 15])),
    # hits, names one good new block, then one holding BAD
    "allocate-second": (
        _no_setup,
        lambda bm: bm.allocate(2, [1, 2, 3, 4, 20, 21, BAD, 14, 17]),
    ),
    "append_slot-own-tail": (_drop_fork, lambda bm: bm.append_slot(0, BAD)),
    "append_slot-cow": (_no_setup, lambda bm: bm.append_slot(0, BAD)),  # copies the tail first
    # seq 0 copies the shared tail and fills it with a good id; seq 3 then fills with BAD
    "append_slots": (_no_setup, lambda bm: bm.append_slots([0, 3], [6, BAD])),
}


def _fails_and_changes_nothing(algo: FailingHash, name: str, error: type) -> None:
    bm = _populated(algo)
    setup, call = CALLS[name]
    setup(bm)
    before = deep_snapshot(bm)
    with pytest.raises(error):
        call(bm)
    assert deep_snapshot(bm) == before
    check_prefix_cache_invariants(bm)


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize(
    "result", [None, "7", 1.5, True, b"\0" * 32], ids=["None", "str", "float", "bool", "bytes"]
)
def test_a_hash_result_that_is_not_an_int_is_refused_and_changes_nothing(
    name: str, result: object
) -> None:
    _fails_and_changes_nothing(FailingHash(result), name, InvalidBlockHash)


@pytest.mark.parametrize("name", list(CALLS))
def test_a_hash_that_raises_changes_nothing(name: str) -> None:
    """No leaked block, no raised refcount, no appended token, no identity left behind."""
    _fails_and_changes_nothing(FailingHash(raises=True), name, RuntimeError)


def test_a_hash_that_raises_with_one_token_blocks_changes_nothing() -> None:
    """Block size 1: every appended token takes a new block and fills it at once."""
    bm = PrefixCachingBlockManager(6, 1, hash_algo=FailingHash(raises=True))
    bm.allocate(0, [1, 2])
    before = deep_snapshot(bm)
    with pytest.raises(RuntimeError):
        bm.append_slot(0, BAD)
    assert deep_snapshot(bm) == before
    with pytest.raises(RuntimeError):
        bm.append_slots([0], [BAD])
    assert deep_snapshot(bm) == before
    bm.append_slot(0, 3)  # still usable
    check_prefix_cache_invariants(bm)


def test_the_issue_repro_a_hash_returning_none_never_serves_other_tokens() -> None:
    """A forgotten ``return`` used to enter blocks under None; after reuse, a prompt [1, 2, 5]
    hit a block that held [7, 7]."""

    def forgot_return(parent: int, tokens: list[int]) -> int:
        hash((parent, tuple(tokens)))  # type: ignore[return-value]

    bm = PrefixCachingBlockManager(2, 2, hash_algo=forgot_return)
    with pytest.raises(InvalidBlockHash, match="hash_algo"):
        bm.allocate(0, [1, 2, 3])
    assert bm.sequences() == [] and bm.num_free == 2 and bm.cached() == {}
