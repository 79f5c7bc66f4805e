"""Readings of a prefix-caching block manager's first diverging call."""

from __future__ import annotations

import ast
import copy
from typing import Any

from servelab.grading.readings.block_manager import block_manager_reading
from servelab.grading.readings.block_manager_counts import claim_took_oldest, count_set
from servelab.grading.readings.block_manager_taken import taken_order_reading
from servelab.grading.readings.difference import (
    BOTH_RAISED,
    MINE_RAISED,
    SAME,
    VALUE,
    Difference,
    WrittenFor,
    call,
)
from servelab.grading.readings.prefix_cache_decode import decode_hash_place
from servelab.grading.readings.prefix_cache_kept import lookup_kept
from servelab.grading.readings.prefix_cache_names import chain_other_formula, lookup_moved
from servelab.grading.readings.prefix_cache_register import register_skipped_equal
from servelab.grading.readings.prefix_cache_returns import (
    cached_by_subtraction,
    chained_from_rest,
    counted_after,
)
from servelab.grading.readings.prefix_cache_room import room_left_partial
from servelab.grading.readings.prefix_cache_rules import (
    chain_short_at_end,
    claim_forgotten,
    parked_forgotten,
    reclaim_refused,
)
from servelab.grading.readings.prefix_cache_unhashed import (
    left_unhashed,
    registered_calls,
    unnamed_after_private,
)
from servelab.grading.readings.prefix_cache_verify import stopped_at_unheld, verified_first_only
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

ROOT = 0
"""The parent hash the chain starts from, as the notebook's."""

# The difference each reading below was written for (see WrittenFor): a reading is shown only
# when the first diverging call differs that way and in nothing else.
CACHE = ("hashed", "cached", "reclaim order")
"""The fields the prefix cache adds to a block manager's."""
FAILED = WrittenFor((BOTH_RAISED,), ("tables", "lengths", "refcounts", "free", "num_free", *CACHE))
DECODE_UNCACHED = WrittenFor((SAME,), below=("hashed", "cached"))
PARKED_UNCACHED = WrittenFor((SAME,), ("free",), above=("reclaim order",))
"""A block never cached put on the evictable list, not the free list."""
FREED_CACHED = WrittenFor((SAME,), ("free", "hashed", "cached"), below=("reclaim order",))
"""A cached block sent to the free list (its hash forgotten) instead of the evictable list."""
ROOM = WrittenFor((VALUE,))
CLAIM_LEFT_EVICTABLE = WrittenFor((SAME,), ("num_free", "free"), above=("reclaim order",))
"""(``free`` shows the plain free blocks, then the evictable ones.)"""
HIT_LEFT_EVICTABLE = WrittenFor(
    (SAME, VALUE), ("num_free", "free", "refcounts"), above=("reclaim order",)
)
LOOKED_UP = WrittenFor((VALUE,))
"""Other hits found by a call that only reads."""
OTHER_BLOCK = WrittenFor(
    (VALUE,), ("refcounts", "free", "num_free", "hashed", "cached", "reclaim order")
)
"""Another block handed out, and what taking it changed."""
REFUSED = WrittenFor((MINE_RAISED,), ("tables", "lengths", "refcounts", "free", "num_free", *CACHE))
"""Yours refused a prompt the reference takes, and what taking it changed."""


def _hits(shown: str | None) -> list[Any] | None:
    try:
        value = ast.literal_eval(shown or "")
    except (ValueError, SyntaxError):
        return None
    return list(value) if isinstance(value, list | tuple) else None


def _lookup_found_it(d: Difference) -> str | None:
    """A lookup that stopped at a block the learner's own ``_chain`` and ``map`` find, holding
    the same tokens: the hashing is right, the miss is in how ``_lookup`` checks what it found."""
    mine, theirs = _hits(d.returned("mine")), _hits(d.returned("theirs"))
    tokens = d.args[0] if d.args else None
    if mine is None or theirs is None or not isinstance(tokens, list | tuple):
        return None
    i = len(mine)
    if mine != theirs[:i] or i >= len(theirs):
        return None
    outcome, chain = d.probe("_chain", list(tokens))
    table, stored_all = getattr(d.subject, "map", None), getattr(d.subject, "tokens", None)
    if outcome != "returned" or not isinstance(chain, list) or i >= len(chain):
        return None
    if not isinstance(table, dict) or not isinstance(stored_all, dict | list):
        return None
    h, block_tokens = chain[i]
    block = table.get(h)
    if block != theirs[i]:
        return None
    stored = stored_all[block]
    if list(stored) != list(block_tokens):
        return None
    said = (
        f"your own `_chain` and `map` find block {block} for block {i} of the prompt, and it "
        f"holds the same tokens {list(stored)}, yet your `_lookup` stopped there: the hashing is "
        "right; the miss is in `_lookup` itself"
    )
    if stored != block_tokens:
        return (
            f"{said}: the stored tokens are a {type(stored).__name__}, the chain's a "
            f"{type(block_tokens).__name__}, and in Python {stored!r} != {block_tokens!r}: "
            "compare them as one type"
        )
    kind = list if isinstance(stored, tuple) else tuple
    if _finds_with(d, kind, tokens) > i:
        return (
            f"{said}: it finds the block once the stored tokens are a {kind.__name__}, so it "
            f"compares the stored {type(stored).__name__} with a {kind.__name__}, and "
            f"{stored!r} != {kind(stored)!r} in Python: compare them as one type"
        )
    return stopped_at_unheld(d, block, i, theirs) or said


def _finds_with(d: Difference, kind: type, tokens: Any) -> int:
    """How many hits your ``_lookup`` finds on a copy whose stored tokens are of ``kind``."""
    try:
        obj = copy.deepcopy(d.subject)
        stored = obj.tokens
        items = stored.items() if isinstance(stored, dict) else enumerate(stored)
        for block, value in list(items):
            if isinstance(value, list | tuple):
                stored[block] = kind(value)
        with line_budget(LINES_PER_CALL):
            return len(obj._lookup(list(tokens)))
    except (Exception, OutOfLines):
        return 0


def _chain_by_parent(d: Difference) -> str | None:
    """Each block of yours carries the hash its parent's chain ends in: proven when hashing
    (your hash, the block's tokens) gives the reference's hash of that block, every block.
    Your chain is asked again (a long one is shown cut short); the reference's is the rule's."""
    tokens = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    if not isinstance(tokens, list | tuple) or not isinstance(size, int) or size < 1:
        return None
    outcome, mine = d.probe("_chain", list(tokens))
    theirs, parent = [], ROOT
    for i in range(len(tokens) // size):
        block_tokens = tuple(tokens[i * size : (i + 1) * size])
        parent = hash((parent, block_tokens))
        theirs.append((parent, block_tokens))
    if outcome != "returned" or not isinstance(mine, list) or not mine:
        return None
    if len(mine) != len(theirs):
        return None
    try:
        named = all(
            hash((m[0], t[1])) == t[0] and tuple(m[1]) == t[1]
            for m, t in zip(mine, theirs, strict=True)
        )
    except (TypeError, IndexError):
        return None
    if not named:
        return None
    return (
        f"yours named each block by the hash before it (block 0 by {mine[0][0]!r}, where the "
        "chain starts): hash((parent, block_tokens)) of a block is its own name, so compute it "
        "first and put that in the chain; a name that leaves out the block's own tokens is "
        "shared by every block with the same prefix before it"
    )


def _chain_slices(d: Difference) -> str | None:
    """As many links as the prompt has full blocks, but each block's tokens another slice of
    the prompt than ``tokens[i * block_size : (i + 1) * block_size]`` (your ``_chain`` called
    again on the call's own tokens): the slice is the difference."""
    tokens = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    if not isinstance(tokens, list | tuple) or not isinstance(size, int) or size < 1:
        return None
    outcome, chain = d.probe("_chain", list(tokens))
    want = [tuple(tokens[i * size : (i + 1) * size]) for i in range(len(tokens) // size)]
    if outcome != "returned" or not isinstance(chain, list) or len(chain) != len(want):
        return None
    try:
        got = [tuple(link[1]) for link in chain]
    except (TypeError, IndexError, KeyError):
        return None
    if got == want or not want:
        return None
    lengths = {len(g) for g in got}
    if len(lengths) == 1 and all(w[: len(g)] == g for g, w in zip(got, want, strict=True)):
        return (
            f"yours kept {lengths.pop()} token(s) of each block where a block holds {size} "
            f"({got[0]}, not {want[0]}): block i's tokens are "
            "tokens[i * block_size : (i + 1) * block_size], and its hash covers all of them"
        )
    i = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
    return (
        f"yours gave block {i} the tokens {got[i]}, not {want[i]}: block i's tokens are "
        "tokens[i * block_size : (i + 1) * block_size]"
    )


def _hit_taken_again(d: Difference) -> str | None:
    """A table holding one block twice where the reference's holds none twice, that block
    evictable before the call: a hit of the call that a new block of the same call reclaimed.
    Why is said only where your call, run again on a copy, shows it: the refcount the block
    had when your ``_alloc`` reclaimed it (0: not claimed yet, so the claim came after the
    new blocks; 1 or more: claimed, yet left on the evictable list)."""
    seq = d.args[0] if d.args else None
    mine, theirs = d.mine.get("tables", {}).get(seq), d.theirs.get("tables", {}).get(seq)
    evictable = d.before.get("reclaim order")
    if not (isinstance(mine, list) and isinstance(theirs, list) and isinstance(evictable, list)):
        return None
    if len(set(theirs)) != len(theirs):
        return None
    twice = [b for b in dict.fromkeys(mine) if mine.count(b) > 1 and b in evictable]
    if not twice:
        return None
    block = twice[0]
    said = f"yours put block {block} in the table of sequence {seq} twice ({mine}): it was"
    said += " evictable"
    held = _held_when_reclaimed(d, block)
    if held == 0 and d.mine.get("refcounts", {}).get(block) == mine.count(block):
        return (
            f"{said}, a hit of this call, and your `_alloc` reclaimed it as a new block while "
            "its refcount was still 0, before the hit was claimed. Claim the hits (off the "
            "evictable list, refcount up) before taking new blocks"
        )
    if held:
        return (
            f"{said} and, a hit, was reclaimed as a new block by the same call at refcount "
            f"{held}: claiming a hit takes it off the evictable list (refcount up), so no new "
            "block can reclaim it"
        )
    return (
        f"{said}, a hit of this call, and a new block of the same call reclaimed it: claim "
        "each hit (off the evictable list, refcount up) before taking any new block, so no "
        "new block can reclaim it"
    )


def _held_when_reclaimed(d: Difference, block: Any) -> int | None:
    """The refcount ``block`` had when your ``_alloc`` returned it, your call run again on a
    copy of the object before it (the refcount read just before each ``_alloc``); None when
    your call takes it without ``_alloc`` or cannot be run again."""
    try:
        obj = copy.deepcopy(d.subject)
        taken: list[tuple[Any, Any]] = []
        alloc = obj._alloc

        def spied() -> Any:
            refs = list(obj.ref)
            got = alloc()
            taken.append((got, refs[got] if isinstance(got, int) else None))
            return got

        obj._alloc = spied
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(*d.args)
    except (Exception, OutOfLines):
        return None
    counts = [ref for got, ref in taken if got == block]
    return counts[0] if counts and type(counts[0]) is int else None


def _alloc_reading(d: Difference) -> str | None:
    """``_alloc`` took the block the reference takes, yet holds it at another count: the
    count is the difference; only another block taken is about the order of reclaim."""
    shown = d.returned("mine") or ""
    if d.same_outcome and d.differ == {"refcounts"} and shown.isdigit():
        block = int(shown)
        mine = d.mine.get("refcounts", {}).get(block, 0)
        theirs = d.theirs.get("refcounts", {}).get(block, 0)
        came = "the evictable list" if block in d.before.get("reclaim order", []) else "free"
        return (
            f"yours handed out block {block} (from {came}) with refcount {mine}; the "
            f"reference's holds it at {theirs}: every block _alloc returns is held by its "
            "taker, whichever list it came from"
        )
    if d.same_outcome:
        return None
    reclaim = d.before.get("reclaim order", [])
    if all(str(b) not in map(str, reclaim) for b in (shown, d.returned("theirs"))):
        return taken_order_reading(d)  # both plain free blocks: the plain list's order
    return OTHER_BLOCK.show(
        d,
        "take a plain free block first, and reclaim a cached one only when none is left, "
        "the least recently freed first (and forget its hash)",
    )


def _registered_elsewhere(d: Difference) -> str | None:
    """The call's own table, the same on both sides, with one block hashed by yours and
    another by the reference's: the two positions, and the number of hits when that is
    exactly how far apart they are (new blocks counted from 0, not from the hits)."""
    seq = d.args[0] if d.args else None
    table = d.theirs.get("tables", {}).get(seq)
    before, mine, theirs = (x.get("hashed") for x in (d.before, d.mine, d.theirs))
    if not all(isinstance(x, list) for x in (table, before, mine, theirs)):
        return None
    assert isinstance(table, list) and isinstance(mine, list) and isinstance(theirs, list)
    extra = [b for b in mine if b not in theirs and b in table]
    missing = [b for b in theirs if b not in mine and b in table]
    if len(extra) != 1 or len(missing) != 1:
        return None
    at, want = table.index(extra[0]), table.index(missing[0])
    said = (
        f"yours hashed block {extra[0]} (position {at} of sequence {seq}'s table) where the "
        f"reference hashes block {missing[0]} (position {want}): block i of a table is named "
        "by the chain's entry i"
    )
    shown = d.returned("mine") or ""
    size = getattr(d.subject, "block_size", 0)
    hits = int(shown) // size if shown.isdigit() and isinstance(size, int) and size > 0 else -1
    if hits > 0 and at - want == hits and _named_by(d, extra[0], at, hits):
        return (
            f"{said}: yours gave it the chain's entry {at - hits}, counting the new blocks "
            f"from 0, not from the {hits} hit(s) before them"
        )
    return said


def _named_by(d: Difference, block: Any, at: int, hits: int) -> bool:
    """Proof of new blocks counted from 0: after your call on a copy, ``block`` (at position
    ``at``) carries the hash of the prompt's chain entry at - hits; and again, on a copy given
    the prompt with its partial last block made full (of tokens never cached), every block
    yours hashes at position p >= hits carries entry p - hits. Pairing the new blocks with
    the chain from its end names them the same way while a partial block is last (with one
    hit), and rightly once none is."""
    seq, tokens = (d.args[0], d.args[1]) if len(d.args) > 1 else (None, None)
    size = getattr(d.subject, "block_size", 0)
    if not isinstance(tokens, list | tuple) or not isinstance(size, int) or size < 1:
        return False
    i = at - hits
    if i < 0 or _hash_of(d.after(), block) != _rule_chain(tokens, size)[i : i + 1]:
        return False
    full = len(tokens) // size * size
    if full == len(tokens):
        return True  # no partial block: the call itself shows it
    whole = [*tokens[:full], *range(10**9, 10**9 + size)]
    chain, obj = _rule_chain(whole, size), d.after(seq, whole)
    table = getattr(obj, "tables", {}).get(seq) if obj is not None else None
    if not isinstance(table, list):
        return False
    named = [(p, _hash_of(obj, b)) for p, b in enumerate(table[hits:], hits)]
    named = [(p, h) for p, h in named if h]
    return bool(named) and all(h == chain[p - hits : p - hits + 1] for p, h in named)


def _rule_chain(tokens: Any, size: int) -> list[Any]:
    """The hashes of a prompt's full blocks, each on its parent's, as the rule computes them."""
    chain, parent = [], ROOT
    for k in range(len(tokens) // size):
        parent = hash((parent, tuple(tokens[k * size : (k + 1) * size])))
        chain.append(parent)
    return chain


def _hash_of(obj: Any, block: Any) -> list[Any]:
    """``[obj.hash[block]]`` when the block is hashed there; [] otherwise."""
    try:
        h = obj.hash[block]
    except (AttributeError, IndexError, KeyError, TypeError):
        return []
    return [h] if h is not None else []


def prefix_cache_reading(d: Difference) -> str | None:
    """The rule a prefix-caching block manager's first diverging call breaks."""
    m, differ = d.method, d.differ
    if d.hidden:
        if m == "free_seq":
            return (
                "yours leaves every field as the reference's, up to which block is which: it "
                "releases the blocks in another order. A sequence frees its blocks tail first "
                "(the last block first), so a prompt's beginning stays cached longest"
            )
        if m == "_register":
            return (
                "yours leaves every field a call shows as the reference's does, yet with the "
                "reference's _register in its place the program behaves: what differs is what "
                "it keeps for a lookup. Record all three: map[h] = block, hash[block] = h and "
                "tokens[block] = block_tokens, the tokens a hit is verified against"
            )
        return decode_hash_place(d)
    skipped = register_skipped_equal(d) if m == "_register" else None
    if skipped:
        return skipped
    if m == "_chain" and not d.same_outcome:
        found = (
            _chain_by_parent(d)
            or _chain_slices(d)
            or chain_short_at_end(d)
            or chain_other_formula(d)
        )
        if found:
            return found
    short = d.error("mine") == d.error("theirs") == "OutOfBlocks"
    partial = room_left_partial(d) if m == "allocate" and short else None
    if partial:
        return partial
    if m == "allocate" and d.i_raised and d.they_raised and differ and short:
        return FAILED.show(
            d,
            "a failed allocate changes nothing: refuse when the new blocks it needs are more "
            "than _room(hits), the room left once its evictable hits are claimed, and claim "
            "hits or take blocks only after that test",
        )
    if m == "append_slot" and differ & {"hashed", "cached"} and d.same_outcome:
        return DECODE_UNCACHED.show(d, _decode_uncached(d))
    if m == "_release" and "reclaim order" in differ:
        block = d.args[0] if d.args else None
        mine_order = d.mine.get("reclaim order", [])
        hashed = d.before.get("hashed", [])
        if isinstance(mine_order, list) and block in mine_order and block not in hashed:
            return PARKED_UNCACHED.show(
                d,
                f"yours put block {block} on the evictable list though it is not cached (hashed "
                f"{hashed}): only a cached block waits there to be reclaimed; a block never "
                "cached (a partial last block) goes back to the plain free list",
            )
        return FREED_CACHED.show(
            d,
            "a cached block freed by its last holder goes on the evictable LRU (still hashed, "
            "reclaimable), not the plain free list",
        )
    if m == "_release" and differ & {"hashed", "cached"}:
        forgotten = parked_forgotten(d)
        if forgotten:
            return forgotten
    if m == "_room" and not d.same_outcome:
        room = _room_reading(d)
        if room:
            return ROOM.show(d, room)
    if m == "_claim" and differ & {"hashed", "cached"}:
        return claim_forgotten(d)
    if m == "_claim" and "reclaim order" in differ:
        kept, taken = d.mine.get("reclaim order", []), d.theirs.get("reclaim order", [])
        if isinstance(kept, list) and isinstance(taken, list) and len(kept) > len(taken):
            return CLAIM_LEFT_EVICTABLE.show(
                d,
                "yours took the hit but left its block on the evictable list: a hit on an "
                "evictable block takes it off that list, since it is held again",
            )
        oldest = claim_took_oldest(d)
        if oldest:
            return oldest
    if m == "_claim" and d.differ == {"refcounts"}:
        counted = count_set(d)
        if counted:
            return counted
    if m == "allocate" and "tables" in differ:
        twice = _hit_taken_again(d)
        if twice:
            return twice
    if m == "allocate" and "hashed" in differ and "tables" not in differ:
        shifted = _registered_elsewhere(d) or left_unhashed(d) or chained_from_rest(d)
        if shifted:
            return shifted
    if m == "allocate" and "reclaim order" in differ and "tables" not in differ:
        return HIT_LEFT_EVICTABLE.show(d, _left_evictable(d))
    if m == "_lookup" and d.same_outcome and "reclaim order" in differ:
        return lookup_moved(d)
    if m == "_lookup" and not d.same_outcome:
        return LOOKED_UP.show(d, _lookup_reading(d))
    if m == "allocate" and d.error("mine") == "OutOfBlocks" and not d.they_raised:
        return REFUSED.show(d, _refused_reading(d))
    if m == "_alloc" and differ:
        return reclaim_refused(d) or _alloc_reading(d)
    if m == "allocate" and not differ and d.outcome_pair == VALUE:
        return cached_by_subtraction(d) or counted_after(d) or block_manager_reading(d)
    return block_manager_reading(d)


def _decode_uncached(d: Difference) -> str:
    """The block this call filled, left uncached: what your ``append_slot`` did with it is said
    only as your call, run again on a copy with ``_register`` watched, shows it (never asked,
    or asked under a hash another block is already cached under, which leaves it private)."""
    rule = (
        "when decoding fills a block, cache it: hash it on the chain and register it, as a "
        "full prompt block is"
    )
    before, mine, theirs = (x.get("hashed") for x in (d.before, d.mine, d.theirs))
    if not all(isinstance(x, list) for x in (before, mine, theirs)):
        return rule
    assert isinstance(before, list) and isinstance(mine, list) and isinstance(theirs, list)
    filled = [b for b in theirs if b not in before and b not in mine]
    asked = registered_calls(d)
    if len(filled) != 1 or asked is None:
        return rule
    block = filled[0]
    hashes = [a[1] for a in asked if len(a) > 1 and a[0] == block]
    if not hashes:
        return unnamed_after_private(d, block) or (
            f"yours did not register block {block}, which this call filled: {rule}"
        )
    table = getattr(d.subject, "map", None)
    try:
        owner = table.get(hashes[0]) if isinstance(table, dict) else None
    except TypeError:
        owner = None
    if owner is None or owner == block:
        return rule
    return (
        f"yours registered block {block}, which this call filled, under the hash block {owner} "
        "is already cached under, so it stays private: a filled block's hash is "
        "hash((parent's hash, its own tokens)), its parent the block before it in the table"
    )


def _left_evictable(d: Difference) -> str | None:
    """The blocks of the call's table yours left on the evictable list: hits (the table's
    first returned // block_size blocks), or new blocks it reclaimed; each said as what it is."""
    seq = d.args[0] if d.args else None
    table, order = d.theirs.get("tables", {}).get(seq), d.mine.get("reclaim order")
    size, shown = getattr(d.subject, "block_size", 0), d.returned("theirs") or ""
    if not (isinstance(table, list) and isinstance(order, list) and shown.isdigit()):
        return None
    if not isinstance(size, int) or size < 1:
        return None
    hits = table[: int(shown) // size]
    kept = [b for b in table if b in order]
    if kept and all(b in hits for b in kept):
        return (
            "a hit on an evictable block takes it off the evictable list: it is held again, "
            "with refcount 1"
        )
    new = [b for b in kept if b not in hits]
    if not new:
        return None
    return (
        f"yours left block {new[0]} on the evictable list, though this call took it as a new "
        f"block of sequence {seq} ({table}): a block reclaimed comes off the evictable list "
        "(its hash forgotten) and is held by its taker"
    )


def _refused_reading(d: Difference) -> str | None:
    """A prompt yours refused that fits: its hits, the new blocks it needs beside them and the
    room there is, each read off the reference's table and the state before the call."""
    seq, tokens = (d.args[0], d.args[1]) if len(d.args) > 1 else (None, None)
    table = d.theirs.get("tables", {}).get(seq)
    size, shown = getattr(d.subject, "block_size", 0), d.returned("theirs") or ""
    free, evictable = d.before.get("num_free"), d.before.get("reclaim order")
    if not (isinstance(tokens, list | tuple) and isinstance(table, list) and shown.isdigit()):
        return None
    if not (isinstance(size, int) and size > 0 and type(free) is int):
        return None
    hits = table[: int(shown) // size]
    claimed = [b for b in hits if isinstance(evictable, list) and b in evictable]
    need, room = -(-len(tokens) // size) - len(hits), free - len(claimed)
    if need > room:
        return None
    if not hits:
        parked = " (its evictable blocks count too)" if evictable else ""
        return (
            f"yours refused sequence {seq}, which fits: it has no hit and needs "
            f"{_plural(need, 'new block')}, and num_free is {free}{parked}: refuse only when "
            "the new blocks beside the hits are more than the room"
        )
    one = len(hits) == 1
    are = f"{len(hits)} of its {len(table)} blocks {'is a hit' if one else 'are hits'} ({hits}"
    if claimed:
        are += f", {len(claimed)} of them evictable, claimed by it"
    return (
        f"yours refused sequence {seq}, which fits: {are}) and "
        f"{'takes' if one else 'take'} no new block, so it needs {_plural(need, 'new block')} "
        f"and {room} can be taken: refuse only when the new blocks beside the hits are more "
        "than the room"
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _room_probe(d: Difference, hits: list[Any]) -> int | None:
    """Your ``_room(hits)`` on a copy of the object before the call, when it returns an int."""
    outcome, value = d.probe("_room", list(hits))
    return value if outcome == "returned" and type(value) is int else None


def _room_reading(d: Difference) -> str | None:
    """``_room`` counted other room than the reference's. Each cause is stated only where your
    own ``_room``, called again, shows it: with no hits it must give num_free; a held hit
    subtracted is proven by every extra copy of it taking one more block, not by one count
    (``num_free // (1 + len(hits))`` matches ``num_free - len(hits)`` at num_free 2); and
    "every hit" only where an evictable block asked alone takes one too (a test the wrong way
    round subtracts only the held ones)."""
    mine, theirs = _room_probe(d, list(d.args[0]) if d.args else []), d.returned("theirs")
    free = d.before.get("num_free")
    asked = list(d.args[0]) if d.args and isinstance(d.args[0], list | tuple) else []
    if mine is None or not (theirs or "").isdigit() or type(free) is not int:
        return None
    evictable = call(d.subject, "evictable") or []
    claimed = [b for b in asked if b in evictable]
    held = [b for b in asked if b not in evictable]
    empty = _room_probe(d, [])
    if empty is not None and empty != free:
        return (
            f"with no hits at all yours counts {empty} block(s) of room where num_free is "
            f"{free}: every block num_free counts (the plain free and the evictable ones alike) "
            "is room; only this request's hits on evictable blocks are subtracted from it"
        )
    if empty != free:
        return None
    each = all(_room_probe(d, held * n) == free - n * len(held) for n in (1, 2, 3))
    if held and each and mine == int(theirs) - len(held):
        spare = _room_probe(d, evictable[:1]) if evictable else None
        which = (
            f"every hit, and a hit on a block another sequence holds ({held})"
            if spare == free - 1
            else f"each hit on a block another sequence holds ({held}), and such a hit"
        )
        return (
            f"yours counted {mine} block(s) of room where {theirs} are left: yours takes one "
            f"block of room for {which} takes no free block, so subtract from num_free only "
            "the hits on evictable blocks"
        )
    if claimed and mine == free and _room_probe(d, claimed) == free:
        return (
            f"yours counted {mine} blocks of room where {theirs} are left: this request's own "
            f"hits on evictable blocks ({claimed}) are claimed by it, no longer free, so "
            "subtract them from num_free"
        )
    return None


def _cap_short(d: Difference, theirs: str) -> bool:
    """Your ``_lookup``, asked again with one more block of tokens after the prompt, finds the
    reference's hits: its cap, one block further on, was what stopped it (a lookup that stops
    for another reason stops there again)."""
    tokens = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    if not isinstance(tokens, list | tuple) or not isinstance(size, int) or size < 1:
        return False
    longer = [*tokens, *[-1] * size]  # a block that is never cached
    outcome, found = d.probe("_lookup", longer)
    want = _hits(theirs)
    return outcome == "returned" and want is not None and _hits(repr(found)) == want


def _lookup_reading(d: Difference) -> str | None:
    """``_lookup`` found other hits than the reference's: too many, one short, or fewer."""
    mine, theirs = d.returned("mine") or "", d.returned("theirs") or ""
    tokens = d.args[0] if d.args else []
    size = getattr(d.subject, "block_size", 0)
    hits = mine.count(",") + 1 if mine.strip("[]") else 0
    if len(mine) > len(theirs) and size and hits * size >= len(tokens):
        return (
            f"yours hit every block of the prompt ({mine}): the hit stops short of the last "
            "prompt token, which is always recomputed"
        )
    kept = lookup_kept(d)
    if kept:
        return kept
    first_only = verified_first_only(d, _hits(mine) or [], _hits(theirs) or [])
    if len(mine) > len(theirs) and first_only:
        return first_only
    if len(mine) > len(theirs):
        return (
            f"yours found hits the reference does not ({mine}, not {theirs}): a hit is a "
            "full block whose chained hash maps to a block verified to hold the same "
            "tokens; the lookup stops at the first miss; a reused block's stale hash is gone"
        )
    if _cap_short(d, theirs) and hits + 1 == theirs.count(",") + 1 and size:
        cap = (len(tokens) - 1) // size
        return (
            f"yours stopped one block short ({mine}, not {theirs}): a lookup of "
            f"{len(tokens)} tokens may match up to (n - 1) // block_size = {cap} full "
            "blocks (only the last token must be computed); given one more block of tokens, "
            "yours finds them all: your cap is one block short"
        )
    found = _lookup_found_it(d)
    if found:
        return found
    return (
        f"yours missed hits the reference finds ({mine}, not {theirs}): hash each full "
        "block chained on the previous block's hash, and look every block up in turn"
    )
