"""Grader topic ``prefix-cache``: hash-chained reuse, then the evictable LRU of cached blocks.

Step 1 checks that equal prefixes share blocks (and only equal prefixes); step 2 that freed
cached blocks stay reusable, are reclaimed only when no plain block is free, oldest first, and
lose their hash when reused — the mistakes behind real bugs (a stale hash serving another
request's data; an evicted block left in the map; a block freed twice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.grading.block_manager import Script
from servelab.grading.core import MachineCheck, Probe, Step, Topic
from servelab.testing.prefix_cache import (
    PREFIX_INVARIANTS,
    check_prefix_invariants,
    prefix_cache_machine,
)

__all__ = ["HINTS", "TOPIC"]

NAME = "PrefixBlockManager"


def _script(impl: Any, line: str) -> Script:
    s = Script(impl, NAME, HINTS)
    s(line)
    return s


def _invariants(s: Script) -> None:
    s.invariants(check_prefix_invariants)


# ------------------------------------------------------------------ step 1 probes
def _same_prompt_shares(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 4)")
    prompt = list(range(10))
    first = s(f"bm.allocate(0, {prompt})")
    s.check(first == 0, f"nothing is cached yet, but allocate returned {first}")
    got = s(f"bm.allocate(1, {prompt})")
    s.check(got == 8, f"the first two full blocks are cached: expected 8 cached tokens, got {got}")
    t0, t1 = s("bm.block_table(0)"), s("bm.block_table(1)")
    s.check(
        t0[:2] == t1[:2] and t0[2] != t1[2],
        f"the two full blocks are shared and the partial tail is not: {t0} vs {t1}",
    )
    s.check([s(f"bm.refcount({b})") for b in t0[:2]] == [2, 2], "shared blocks need refcount 2")
    _invariants(s)


def _last_token_computed(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 4)")
    s("bm.allocate(0, [1, 2, 3, 4, 5, 6, 7, 8])")
    got = s("bm.allocate(1, [1, 2, 3, 4, 5, 6, 7, 8])")
    s.check(got == 4, f"the last token must be computed, so at most 1 of 2 blocks hits: got {got}")
    _invariants(s)


def _chained_hash(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    s("bm.allocate(0, [1, 2, 3, 4, 9])")
    got = s("bm.allocate(1, [7, 7, 3, 4, 9])")
    s.check(
        got == 0,
        "block [3, 4] follows a different prefix, so it must not hit "
        f"(the hash chains the previous block's hash), got {got} cached tokens",
    )
    got = s("bm.allocate(2, [1, 2, 5, 5, 9])")
    s.check(got == 2, f"only the first block [1, 2] is shared, got {got} cached tokens")
    _invariants(s)


def _same_block_other_place(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    s("bm.allocate(0, [1, 1, 5])")
    got = s("bm.allocate(1, [1, 1, 1, 1, 5])")
    s.check(
        got == 2,
        "[1, 1] at positions 2-3 follows the prefix [1, 1], which nobody cached: only the "
        f"first block hits, so 2 cached tokens, got {got}",
    )
    _invariants(s)


def _lookup_stops_at_a_miss(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(5, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.allocate(1, [1, 2])")  # its one block is computed, so a private copy of [1, 2]
    s("bm.append_slot(1, 3)")
    s("bm.append_slot(1, 4)")  # [3, 4] after [1, 2] is cached
    s("bm.free_seq(0)")
    s("bm.allocate(2, [7, 7, 7, 7, 7])")  # reclaims the cached [1, 2]
    got = s("bm.num_cached_tokens([1, 2, 3, 4, 5])")
    s.check(
        got == 0,
        f"the first block [1, 2] is no longer cached, so nothing hits; got {got} (a lookup "
        "stops at the first miss)",
    )


def _decode_fills_cache(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.append_slot(0, 4)")
    got = s("bm.allocate(1, [1, 2, 3, 4, 5])")
    s.check(got == 4, f"block [3, 4] became full by append_slot and should be cached: got {got}")
    _invariants(s)


# ------------------------------------------------------------------ step 2 probes
def _freed_stays_cached(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(4, 2)")
    s("bm.allocate(0, [1, 2, 3, 4, 5])")
    s("bm.free_seq(0)")
    s.check(s("bm.num_free") == 4, "evictable blocks still count as free")
    s.check(len(s("bm.evictable()")) == 2, "the two full blocks should stay cached (evictable)")
    got = s("bm.allocate(1, [1, 2, 3, 4, 5])")
    s.check(got == 4, f"the freed prefix is still cached: expected 4 tokens, got {got}")
    s.check(s("bm.evictable()") == [], "a hit takes the block off the evictable list")


def _plain_free_first(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(4, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.free_seq(0)")
    s("bm.allocate(1, [7, 8, 9])")
    got = s("bm.num_cached_tokens([1, 2, 3])")
    s.check(
        got == 2,
        "two plain free blocks were left, so the cached block [1, 2] must "
        f"survive; num_cached_tokens([1, 2, 3]) is {got}",
    )


def _least_recent_first(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(3, 1)")
    s("bm.allocate(0, [1, 2])")
    s("bm.free_seq(0)")
    s("bm.allocate(1, [5, 6])")
    s("bm.free_seq(1)")
    s("bm.allocate(2, [8, 9])")
    s.check(
        s("bm.num_cached_tokens([5, 6])") == 1,
        "the least recently freed block [1] should be reclaimed, not [5]",
    )
    s.check(s("bm.num_cached_tokens([1, 2])") == 0, "block [1] was the oldest and is gone")


def _freed_again_goes_last(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(3, 1)")
    s("bm.allocate(0, [1, 2])")
    s("bm.free_seq(0)")
    s("bm.allocate(1, [5, 6])")
    s("bm.free_seq(1)")
    s("bm.allocate(2, [1, 9])")  # a hit on [1], freed again below: now the most recent
    s("bm.free_seq(2)")
    s("bm.allocate(3, [8, 8])")
    got = s("bm.num_cached_tokens([1, 7])")
    s.check(
        got == 1,
        "block [1] was freed again after [5] and [9], so it is the last to be reclaimed; "
        f"num_cached_tokens([1, 7]) is {got}",
    )


def _reused_block_forgets(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(3, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.free_seq(0)")
    s("bm.allocate(1, [7, 8, 9, 5, 6])")
    table = s("bm.block_table(1)")
    for b in table[-1:]:
        h = s(f"bm.block_hash({b})")
        s.check(
            h is None, f"block {b} was reclaimed for new tokens but still carries its old hash {h}"
        )
    got = s("bm.num_cached_tokens([1, 2, 3])")
    s.check(got == 0, f"block [1, 2] was overwritten, yet a lookup still finds {got} tokens")


def _evicted_leaves_map(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(2, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.free_seq(0)")
    s("bm.allocate(1, [7, 8, 9])")
    owned = set(s("bm.block_table(1)"))
    stale = {h: b for h, b in s("bm.cached()").items() if b in owned}
    s.check(
        all(s(f"bm.block_hash({b})") == h for h, b in stale.items()),
        f"the cache map still sends a hash to block(s) {sorted(stale.values())}, which "
        "were evicted and reused",
    )


def _freed_once(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(4, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.free_seq(0)")
    free = s("bm.free_list()")
    s.check(
        len(free) == len(set(free)) == 4,
        f"free_list() is {free}: a block appears twice, so it was freed twice",
    )
    _invariants(s)


HINTS: dict[str, str] = {
    "free-list": "a block was freed twice (it sits twice in free_list()): a block whose "
    "refcount reaches 0 goes to the evictable list if it holds a hash, else to the free list "
    "— never both",
    "refcount-matches-tables": "a hit must raise the block's refcount like a fork does",
    "table-length": "a table holds ceil(len / block_size) blocks, cached or new",
    "cache-map": "a stale map entry outlived an eviction: when a cached block is reclaimed, "
    "delete its entry from the hash map and clear the block's hash",
    "evictable": "a cached block freed by its last holder goes on the evictable LRU (and only "
    "then); free_list() lists plain free blocks first",
    "stale-hash": "a reclaimed block kept its stale hash: clear the block's hash and its map "
    "entry when an evictable block is reused, and check the stored tokens on every hit",
    "wrong-data": "a hit served a block whose contents differ from the prompt: a stale hash "
    "or map entry survived reuse — verify the stored tokens on every hit",
    "hit-count": "a hit is a block whose whole prefix is cached: chain each block's hash over "
    "the previous block's hash, compare the stored tokens, and stop at the first miss",
    "hit-cap": "cap hits at (len - 1) // block_size blocks: the last prompt token is always "
    "computed, its logits start decoding",
    "chain": "a block's hash must chain over the previous block's hash, so one cached block "
    "never answers for the same tokens at another place in another prefix",
    "first-miss": "the lookup stops at the first miss: a block after a missing one follows a "
    "prefix that is not cached",
    "freed-again": "a block freed, hit and freed again is the most recently freed: it goes to "
    "the back of the reclaim order (last time freed, not first time)",
    "lru-eviction": "reclaim cached blocks only when no plain free block is left, and the "
    "least recently freed first",
    "expected-error": "raise the documented error: OutOfBlocks, UnknownSequence or SequenceExists",
    "exception-safety": "check that the request fits before claiming hits or taking blocks",
    "exception": "a call raised an unexpected error; the repro above shows which",
}


def _probe(name: str, hint_id: str, run: Callable[[Any], None]) -> Probe:
    return Probe(name, HINTS[hint_id], run)


def _build(impl: Any) -> Any:
    return prefix_cache_machine(impl, name=NAME)


def _build_without_frees(impl: Any) -> Any:
    return prefix_cache_machine(impl, name=NAME, frees=False)


STEP1_INVARIANTS = [
    "refcount-matches-tables",
    "table-length",
    "cache-map",
    "stale-hash",
    "wrong-data",
    "hit-count",
    "hit-cap",
]


TOPIC = Topic(
    name="prefix-cache",
    title="Prefix caching over the block manager",
    steps=[
        Step(
            1,
            "hash-chained blocks and reuse",
            [
                _probe(
                    "an equal prompt shares its full blocks",
                    "refcount-matches-tables",
                    _same_prompt_shares,
                ),
                _probe("the last prompt token is always computed", "hit-cap", _last_token_computed),
                _probe("a block's identity covers its whole prefix", "hit-count", _chained_hash),
                _probe(
                    "equal blocks at different places are different",
                    "chain",
                    _same_block_other_place,
                ),
                _probe("a block filled by decoding is cached", "hit-count", _decode_fills_cache),
            ],
            MachineCheck(
                "allocate / append / fork vs the model (nothing freed yet)",
                _build_without_frees,
                [PREFIX_INVARIANTS[i] for i in STEP1_INVARIANTS],
                HINTS,
                60,
                25,
            ),
        ),
        Step(
            2,
            "the evictable LRU of freed cached blocks",
            [
                _probe("a freed block is freed once", "free-list", _freed_once),
                _probe("freed full blocks stay cached", "evictable", _freed_stays_cached),
                _probe("eviction removes the map entry", "cache-map", _evicted_leaves_map),
                _probe("a reclaimed block forgets its hash", "stale-hash", _reused_block_forgets),
                _probe("plain free blocks go first", "lru-eviction", _plain_free_first),
                _probe(
                    "the least recently freed is reclaimed first",
                    "lru-eviction",
                    _least_recent_first,
                ),
                _probe("freed again goes to the back", "freed-again", _freed_again_goes_last),
                _probe("a lookup stops at the first miss", "first-miss", _lookup_stops_at_a_miss),
            ],
            MachineCheck(
                "allocate / append / fork / free vs the model",
                _build,
                list(PREFIX_INVARIANTS.values()),
                HINTS,
                80,
                30,
            ),
        ),
    ],
)
