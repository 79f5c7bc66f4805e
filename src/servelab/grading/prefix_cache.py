"""Grader topic ``prefix-cache``: the hash chain, sharing on allocate, then the evictable LRU.

Step 1 grades the cache's three inner methods through the notebook skeleton's state:
``_chain`` names each full block by its whole prefix, ``_register`` caches a block unless an
equal one is cached already, ``_lookup`` finds the cached blocks of a prompt (verified against
the stored tokens, capped so the last token is computed, stopping at the first miss). A class
without the skeleton's ``map``, ``hash`` and ``tokens`` (the package's
:class:`~servelab.kv.prefix.PrefixCachingBlockManager`, or one written from scratch) is checked
on the same rules through ``allocate`` and ``num_cached_tokens`` instead. Step 2 checks that
allocate and append share equal prefixes (and only equal prefixes); step 3 that freed cached
blocks stay reusable, are reclaimed only when no plain block is free, oldest first, and lose
their hash when reused — the mistakes behind real bugs (a stale hash serving another request's
data; an evicted block left in the map; a block freed twice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.grading._script import Script
from servelab.grading.about import About, Hint
from servelab.grading.block_manager import check_rules
from servelab.grading.prefix_cache_hints import (
    HINTS,
    decode_misnamed,
    dropped_tokens,
    parked_in_front,
    stored_tokens,
)
from servelab.grading.prefix_cache_order import (
    cached_since_asked,
    decode_names_the_copy,
    decode_one_token_blocks,
    lookup_sees_registers,
    plain_free_at_the_right_end,
    plain_free_from_the_left_end,
    refused_keeps_nothing,
    unverified_hit_ends_lookup,
)
from servelab.grading.prefix_cache_own_copy import own_copy_failure
from servelab.grading.prefix_cache_replay import REPLAY
from servelab.grading.topic import MachineCheck, Probe, Step, Topic
from servelab.testing import prefix_chain
from servelab.testing.prefix_cache import (
    INVARIANTS,
    check_prefix_cache_invariants,
    prefix_cache_machine,
)
from servelab.testing.prefix_chain import chain_machine

__all__ = ["HINTS", "TOPIC"]

NAME = "PrefixBlockManager"


def _script(impl: Any, line: str) -> Script:
    s = Script.graded(REPLAY, impl, HINTS)
    s(line)
    return s


def _invariants(s: Script) -> None:
    check_rules(s, check_prefix_cache_invariants)


# ------------------------------------------------------------------ step 1 probes
# Through the skeleton's _chain, _register, _lookup and its map, hash and tokens.
def _skeleton(impl: Any) -> bool:
    """Whether ``impl`` keeps the notebook skeleton's cache state (``map``, ``hash``, ``tokens``).

    A class that cannot even be built counts as one: the probe then reports that error.
    """
    try:
        bm = impl(4, 2)
    except Exception:
        return True
    shapes = (("map", dict), ("hash", list), ("tokens", list))
    return all(isinstance(getattr(bm, attr, None), kind) for attr, kind in shapes)


def _chain_entries(s: Script, prompt: list[int]) -> list[tuple[Any, Any]]:
    line = f"chain = bm._chain({prompt})"
    s(line)
    chain = s.ns["chain"]
    try:
        return [(h, t) for h, t in chain]
    except (TypeError, ValueError):
        raise s.fail(
            f"`{line}` gave {chain!r}; expected a list of (hash, block_tokens) pairs"
        ) from None


def _chain_names_full_blocks(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    chain = _chain_entries(s, [1, 2, 3, 4, 5])
    tokens = [t for _, t in chain]
    s.check(
        tokens == [(1, 2), (3, 4)] and all(isinstance(t, tuple) for t in tokens),
        f"[1, 2, 3, 4, 5] has two full blocks, (1, 2) and (3, 4); [5] is still being written "
        f"and gets no name. The chain's block tokens are {tokens!r}",
    )
    s.check(_chain_entries(s, [1]) == [], "[1] fills no block of 2, so its chain is empty")


def _chain_covers_prefix(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    (h0, _), (h1, _) = _chain_entries(s, [1, 1, 1, 1, 5])[:2]
    s.check(
        h0 != h1,
        "(1, 1) at positions 0-1 and (1, 1) at positions 2-3 follow different prefixes, yet "
        f"both are named {h0!r}: the hash must chain over the previous block's hash",
    )
    other = _chain_entries(s, [2, 2, 1, 1])
    s.check(
        other[1][0] != h1,
        "(1, 1) after [2, 2] and (1, 1) after [1, 1] get the same hash: the hash must chain "
        "over the previous block's hash",
    )
    again = _chain_entries(s, [1, 1, 1, 1, 7])
    s.check(
        [h for h, _ in again] == [h0, h1],
        "the same prefix [1, 1, 1, 1] got different hashes: a hash depends on the tokens only",
    )


def _named(value: Any, h: Any) -> str:
    """``value`` as the report shows it: the chain's hash written ``h``, not a long number."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_named(k, h)}: {_named(v, h)}" for k, v in value.items()) + "}"
    return "h" if value == h and not isinstance(value, bool) and value is not None else repr(value)


def _register_caches(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    ((h, _),) = _chain_entries(s, [1, 2, 3])
    s("h, block_tokens = chain[0]")
    s("bm._register(3, h, block_tokens)")
    got = (s("bm.map"), s("bm.hash[3]"), s("bm.tokens[3]"))
    s.check(
        got == ({h: 3}, h, (1, 2)),
        "after registering block 3: map should be {h: 3}, hash[3] h and tokens[3] (1, 2); "
        f"got map {_named(got[0], h)}, hash[3] {_named(got[1], h)}, tokens[3] {got[2]!r}",
    )


def _register_keeps_the_first(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    ((h, _),) = _chain_entries(s, [1, 2, 3])
    s("h, block_tokens = chain[0]")
    s("bm._register(3, h, block_tokens)")
    s("bm._register(5, h, block_tokens)  # an equal block: 3 is already cached under h")
    got = (s("bm.map"), s("bm.hash[5]"), s("bm.tokens[5]"))
    s.check(
        got == ({h: 3}, None, None),
        "block 3 was already cached under h, so block 5 stays private: map keeps {h: 3} and "
        f"block 5 has no hash or tokens; got map {_named(got[0], h)}, hash[5] "
        f"{_named(got[1], h)}, tokens[5] {got[2]!r}",
    )


def _register_all(s: Script, prompt: list[int], blocks: list[int | None]) -> None:
    _chain_entries(s, prompt)
    for i, b in enumerate(blocks):
        if b is not None:
            s(f"bm._register({b}, *chain[{i}])")


def _lookup_hits(s: Script, prompt: list[int], want: list[int], message: str) -> None:
    got = s(f"bm._lookup({prompt})")
    s.check(list(got) == want, f"bm._lookup({prompt}) returned {got!r}; expected {want}: {message}")


def _lookup_finds_the_prefix(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    _register_all(s, [1, 2, 3, 4, 5, 6], [0, 1, 2])
    _lookup_hits(s, [1, 2, 3, 4, 5, 6, 7], [0, 1, 2], "all three blocks are cached, in order")
    _lookup_hits(s, [1, 2, 9, 9, 5, 6, 7], [0], "only [1, 2] is a cached prefix here")
    _lookup_hits(s, [7, 7, 7], [], "nothing starting with [7, 7] is cached")


def _lookup_capped(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    _register_all(s, [1, 2, 3, 4, 5, 6], [0, 1, 2])
    _lookup_hits(
        s,
        [1, 2, 3, 4, 5, 6],
        [0, 1],
        "the last prompt token is always computed, so at most (6 - 1) // 2 = 2 blocks hit",
    )


def _lookup_first_miss(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    _register_all(s, [1, 2, 3, 4, 5, 6], [0, None, 7])  # 7: the pool's last block
    _lookup_hits(
        s,
        [1, 2, 3, 4, 5, 6, 7],
        [0],
        "block [3, 4] is not cached, so the lookup stops there; [5, 6] after it is unreachable",
    )
    got = s("bm._lookup([5, 6, 7])")
    s.check(
        list(got) == [],
        f"bm._lookup([5, 6, 7]) returned {got!r}; expected []: a first block [5, 6] is not in "
        "map (block 7 caches [5, 6] after [1, 2, 3, 4], under another hash)",
        "absent-hash",
    )


def _lookup_verifies(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    _register_all(s, [1, 2, 3, 4, 5], [0, 1])
    s("bm.tokens[1] = (0, 0)  # as if another block answered to this hash")
    _lookup_hits(
        s,
        [1, 2, 3, 4, 5],
        [0],
        "block 1 is in map under the right hash, but its stored tokens (0, 0) are not [3, 4]",
    )
    got = (1 in s("bm.map").values(), s("bm.hash[1]"), s("bm.tokens[1]"))
    s.check(
        got[0] and got[1] is not None and got[2] == (0, 0),
        "bm._lookup([1, 2, 3, 4, 5]) changed block 1's entry: it should stay in map with its "
        f"hash and stored tokens (0, 0); now block 1 in map: {got[0]}, hash[1]: "
        f"{'set' if got[1] is not None else None}, tokens[1]: {got[2]!r}. A lookup only "
        "reads, and block 1 stays cached for the prompt it holds",
        "lookup-reads",
    )


def _verified_in_a_chain(impl: Any) -> None:
    unverified_hit_ends_lookup(_script(impl, f"bm = {NAME}(8, 2)"))


def _duplicate_stays_private(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.allocate(1, [1, 2])")  # its one block is computed: a private copy of [1, 2]
    first, twin = s("bm.block_table(0)")[0], s("bm.block_table(1)")[0]
    s.check(
        list(s("bm.cached()").values()) == [first] and s(f"bm.block_hash({twin})") is None,
        f"block {first} already caches [1, 2], so its copy {twin} stays private; cached() is "
        f"{s('bm.cached()')}",
    )
    _invariants(s)


def _no_public_equivalent(impl: Any) -> None:
    """Tampering with stored tokens needs the skeleton's state: nothing to check otherwise."""


def _skeleton_or(
    inner: Callable[[Any], None], *public: Callable[[Any], None]
) -> Callable[[Any], None]:
    """Run ``inner`` on a skeleton-shaped class, else the same rule through the public API."""

    def run(impl: Any) -> None:
        if _skeleton(impl):
            inner(impl)
            return
        for probe in public:
            probe(impl)

    return run


# ------------------------------------------------------------------ step 2 probes
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
    refs = [s(f"bm.refcount({b})") for b in t0[:2]]
    s.check(
        refs == [2, 2],
        f"the shared blocks' refcounts are {refs}, expected [2, 2]: two tables hold each",
    )
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
    s("bm.allocate(0, [1, 2, 3, 4, 5])")  # its third block is named after the second
    s("bm.append_slot(0, 6)")
    misnamed = decode_misnamed(s.ns["bm"], 0, [1, 2, 3, 4, 5, 6])
    got = s("bm.allocate(1, [1, 2, 3, 4, 5, 6, 7])")
    if got != 6:
        raise s.fail(
            f"bm.allocate(1, [1, 2, 3, 4, 5, 6, 7]) returned {got}, expected 6: in the "
            "reference block [5, 6], filled by append_slot(0, 6), is cached, and all three "
            "blocks hit",
            hint=misnamed,
        )
    _invariants(s)


def _own_copy_of_the_prompt(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(8, 2)")
    s("prompt = [1, 2, 3]")
    s("bm.allocate(0, prompt)")
    s("prompt.append(9)")  # the caller reuses its list after the call
    s("bm.append_slot(0, 4)")
    got = s("bm.allocate(1, [1, 2, 3, 4, 5])")
    if got != 4:
        raise own_copy_failure(s, got)
    _invariants(s)


# ------------------------------------------------------------------ step 3 probes
def _freed_stays_cached(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(4, 2)")
    s("bm.allocate(0, [1, 2, 3, 4, 5])")
    stored = stored_tokens(s.ns["bm"])
    s("bm.free_seq(0)")
    kept = stored_tokens(s.ns["bm"])
    free = s("bm.num_free")
    s.check(
        free == 4,
        f"num_free is {free} after free_seq(0), expected 4: in the reference every block is "
        "free again, the two cached ones as evictable (they still count as free)",
    )
    evictable = s("bm.evictable()")
    s.check(
        len(evictable) == 2,
        f"evictable() is {evictable}: the reference keeps the two full blocks cached (evictable)",
    )
    dropped = dropped_tokens(s.ns["bm"], stored, kept)
    got = s("bm.allocate(1, [1, 2, 3, 4, 5])")
    if got != 4:
        message = f"the freed prefix is still cached: expected 4 tokens, got {got}"
        raise s.fail(message, hint=dropped)
    s.check(s("bm.evictable()") == [], "a hit takes the block off the evictable list")


def _plain_free_first(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(4, 2)")
    s("bm.allocate(0, [1, 2, 3])")
    s("bm.free_seq(0)")
    s("bm.allocate(1, [7, 8, 9])")
    got = s("bm.num_cached_tokens([1, 2, 3])")
    s.check(
        got == 2,
        f"num_cached_tokens([1, 2, 3]) is {got}, expected 2: in the reference free_seq(0) "
        "leaves two plain free blocks, which allocate(1, [7, 8, 9]) takes, so the cached "
        "block [1, 2] survives",
    )


def _least_recent_first(impl: Any) -> None:
    s = _script(impl, f"bm = {NAME}(3, 1)")
    s("bm.allocate(0, [1, 2])")
    front = parked_in_front(s.ns["bm"], 0)
    s("bm.free_seq(0)")
    s("bm.allocate(1, [5, 6])")
    s("bm.free_seq(1)")
    s("bm.allocate(2, [8, 9])")
    if s("bm.num_cached_tokens([5, 6])") != 1:
        raise s.fail("the least recently freed block [1] should be reclaimed, not [5]", hint=front)
    got = s("bm.num_cached_tokens([1, 2])")
    if got != 0:
        raise s.fail(
            f"num_cached_tokens([1, 2]) is {got}, expected 0: block [1] was freed first, so "
            "the reference reclaims it for [8, 9]",
            hint=front,
        )


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
    if len(free) == len(set(free)) == 4:
        _invariants(s)
        return
    twice = sorted({b for b in free if free.count(b) > 1})
    if twice:
        raise s.fail(
            f"free_list() is {free}: block{_listed(twice)} listed twice; in the reference "
            "each of the 4 blocks is listed once after free_seq(0)"
        )
    missing = sorted(set(range(4)) - set(free))
    if not missing:
        raise s.fail(f"free_list() is {free}, expected the 4 blocks [0, 1, 2, 3] once each")
    raise s.fail(
        f"free_list() is {free}: block{_listed(missing)} missing; in the reference each of "
        "the 4 blocks is listed once after free_seq(0)",
        hint=_RETURNED,
    )


_RETURNED = Hint(
    "a block whose refcount reaches 0 goes back: to the evictable list if it holds a hash, "
    "else to the plain free list",
    About(("_release",), ("free", "num_free", "reclaim order")),
)
"""The freed-once probe's hint where a block never came back (no block listed twice)."""


def _listed(blocks: list[int]) -> str:
    """What follows the word "block": " 0 is", or "s [0, 1] are"."""
    return f" {blocks[0]} is" if len(blocks) == 1 else f"s {blocks} are"


def _probe(name: str, hint_id: str, run: Callable[[Any], None]) -> Probe:
    return Probe(name, HINTS[hint_id], run)


def _build(impl: Any) -> Any:
    return prefix_cache_machine(impl, name=NAME)


def _build_without_frees(impl: Any) -> Any:
    return prefix_cache_machine(impl, name=NAME, frees=False)


def _build_chain(impl: Any) -> Any:
    """Step 1's machine: the skeleton's internals, else allocate and append (nothing freed)."""
    if _skeleton(impl):
        return chain_machine(impl, name=NAME)
    return _build_without_frees(impl)


STEP2_INVARIANTS = [
    "refcount-matches-tables",
    "table-length",
    "cache-map",
    "stale-hash",
    "wrong-data",
    "hit-count",
    "hit-cap",
]

TOPIC = Topic(
    replay=REPLAY,
    checkpoint="prefix_cache",
    name="prefix-cache",
    title="Prefix caching over the block manager",
    steps=[
        Step(
            1,
            "the hash chain: chain, register, look up",
            [
                _probe(
                    "only full blocks are chained",
                    "chain-shape",
                    _skeleton_or(_chain_names_full_blocks, _same_prompt_shares),
                ),
                _probe(
                    "a block's hash covers its whole prefix",
                    "chain",
                    _skeleton_or(_chain_covers_prefix, _same_block_other_place, _chained_hash),
                ),
                _probe(
                    "register caches a block under its hash",
                    "register",
                    _skeleton_or(_register_caches, _same_prompt_shares),
                ),
                _probe(
                    "an equal block already cached stays private",
                    "duplicate",
                    _skeleton_or(_register_keeps_the_first, _duplicate_stays_private),
                ),
                _probe(
                    "a lookup finds the cached prefix",
                    "hit-count",
                    _skeleton_or(_lookup_finds_the_prefix, _chained_hash),
                ),
                _probe(
                    "the last prompt token is always computed",
                    "hit-cap",
                    _skeleton_or(_lookup_capped, _last_token_computed),
                ),
                _probe(
                    "a lookup stops at the first miss",
                    "first-miss",
                    _skeleton_or(_lookup_first_miss, _lookup_stops_at_a_miss),
                ),
                _probe(
                    "a hit is checked against the stored tokens",
                    "verify",
                    _skeleton_or(_lookup_verifies, _no_public_equivalent),
                ),
                _probe(
                    "a hit that fails its check ends the lookup",
                    "verify",
                    _skeleton_or(_verified_in_a_chain, _no_public_equivalent),
                ),
                _probe(
                    "a lookup finds what was cached since the last one",
                    "lookup-now",
                    _skeleton_or(lookup_sees_registers, cached_since_asked),
                ),
            ],
            MachineCheck(
                "chain / register / lookup vs the model",
                _build_chain,
                list(prefix_chain.INVARIANTS.values()),
                HINTS,
                60,
                20,
                in_final_grade=True,  # the last machine reaches the three only through its calls
            ),
        ),
        Step(
            2,
            "allocate and append share cached blocks",
            [
                _probe(
                    "an equal prompt shares its full blocks",
                    "refcount-matches-tables",
                    _same_prompt_shares,
                ),
                _probe("the last prompt token is always computed", "hit-cap", _last_token_computed),
                _probe("a block's identity covers its whole prefix", "chain", _chained_hash),
                _probe(
                    "equal blocks at different places are different",
                    "chain",
                    _same_block_other_place,
                ),
                _probe("a block filled by decoding is cached", "decode-fill", _decode_fills_cache),
                _probe(
                    "the manager keeps its own copy of the prompt",
                    "own-tokens",
                    _own_copy_of_the_prompt,
                ),
                _probe(
                    "a refused allocate keeps nothing",
                    "exception-safety",
                    _skeleton_or(
                        lambda impl: refused_keeps_nothing(Script.graded(REPLAY, impl, HINTS)),
                        _no_public_equivalent,
                    ),
                ),
                _probe(
                    "a decode that fills a copy names the copy",
                    "decode-fill",
                    lambda impl: decode_names_the_copy(Script.graded(REPLAY, impl, HINTS)),
                ),
                _probe(
                    "a one-token block is named over its parent",
                    "decode-fill",
                    decode_one_token_blocks,
                ),
            ],
            MachineCheck(
                "allocate / append / fork vs the model (nothing freed yet)",
                _build_without_frees,
                [INVARIANTS[i] for i in STEP2_INVARIANTS],
                HINTS,
                60,
                25,
            ),
        ),
        Step(
            3,
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
                _probe(
                    "a freed plain block joins the right end",
                    "free-order-return",
                    lambda impl: plain_free_at_the_right_end(Script.graded(REPLAY, impl, HINTS)),
                ),
                _probe(
                    "a new block leaves the plain free list from the left",
                    "free-order-take",
                    lambda impl: plain_free_from_the_left_end(Script.graded(REPLAY, impl, HINTS)),
                ),
            ],
            MachineCheck(
                "allocate / append / fork / free vs the model",
                _build,
                list(INVARIANTS.values()),
                HINTS,
                80,
                30,
            ),
        ),
    ],
)
