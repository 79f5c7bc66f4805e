"""Readings of a prefix cache's ``_release`` that parks a cached block but forgets part of what
a later hit needs; apart from :mod:`servelab.grading.readings.prefix_cache` to keep it short."""

from __future__ import annotations

from servelab.grading.readings.difference import SAME, Difference, WrittenFor

PARKED_FORGOTTEN = WrittenFor((SAME,), below=("hashed", "cached"))
"""A block parked as the reference parks it, with its hash or map entry gone."""


def parked_forgotten(d: Difference) -> str | None:
    """Yours put the freed cached block on the evictable list, as the reference does, yet
    cleared its hash or removed its map entry in the same call: read off the fields alone."""
    block = d.args[0] if d.args else None
    order = d.mine.get("reclaim order")
    if d.theirs.get("reclaim order") != order or not isinstance(order, list) or block not in order:
        return None
    was_hashed, was_cached = (block in (d.before.get(k) or []) for k in ("hashed", "cached"))
    gone = []
    if was_hashed and block not in (d.mine.get("hashed") or []):
        gone.append("cleared its hash")
    if was_cached and block not in (d.mine.get("cached") or []):
        gone.append("removed its map entry")
    if not gone:
        return None
    return PARKED_FORGOTTEN.show(
        d,
        f"yours put block {block} on the evictable list but {' and '.join(gone)}: a parked "
        "block keeps its hash, its tokens and its map entry while it waits there, so a later "
        "prompt can still hit it; only reclaiming it (_alloc) forgets them",
    )


CLAIM_FORGOT = WrittenFor((SAME,), below=("hashed", "cached"))
"""A hit claimed as the reference claims it, with its hash or map entry gone."""


def claim_forgotten(d: Difference) -> str | None:
    """Yours claimed a cached block for a hit and, in the same call, cleared its hash or removed
    its map entry, where the reference keeps both: read off the fields alone."""
    block = d.args[0] if d.args else None
    if d.method != "_claim" or not d.differ <= {"hashed", "cached"}:
        return None
    gone = []
    for field, what in (("hashed", "cleared its hash"), ("cached", "removed its map entry")):
        was, kept = d.before.get(field) or [], d.theirs.get(field) or []
        if block in was and block in kept and block not in (d.mine.get(field) or []):
            gone.append(what)
    if not gone:
        return None
    return CLAIM_FORGOT.show(
        d,
        f"yours claimed block {block} for a hit but {' and '.join(gone)}: a claimed block "
        "stays cached (its hash, tokens and map entry), so the next prompt with the same "
        "prefix hits it too; _claim only takes it off the evictable list and counts the new "
        "holder, and only reclaiming it (_alloc) forgets it",
    )


def chain_short_at_end(d: Difference) -> str | None:
    """Your ``_chain`` left out the last full block of a prompt of whole blocks, the rest as
    the reference's: shown only where your ``_chain`` on the same tokens and one more chains
    every full block (a stop that misses the last block's start only when it ends the
    prompt), not where it drops the last block whatever follows."""
    tokens = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    if not isinstance(tokens, list | tuple) or not isinstance(size, int) or size < 1:
        return None
    if len(tokens) % size or len(tokens) < size:
        return None
    theirs, parent = [], 0  # the chain's root, as the reference starts it
    for i in range(len(tokens) // size):
        block_tokens = tuple(tokens[i * size : (i + 1) * size])
        parent = hash((parent, block_tokens))
        theirs.append((parent, block_tokens))
    longer = [*tokens, tokens[-1]]
    (said, mine), (again, more) = d.probe("_chain", list(tokens)), d.probe("_chain", longer)
    if said != "returned" or again != "returned":
        return None
    try:
        short = [(m[0], tuple(m[1])) for m in mine] == theirs[:-1]
        whole = [(m[0], tuple(m[1])) for m in more] == theirs
    except (TypeError, IndexError):
        return None
    if not (short and whole):
        return None
    n = len(theirs)
    return (
        f"yours chained {n - 1} of the {n} full blocks of these {len(tokens)} tokens, leaving "
        f"out the last, yet all {n} when one more token follows (your _chain on {longer}): "
        "the walk stops one block early exactly when the last full block ends the prompt. "
        "That block starts at len(tokens) - block_size, so the loop must reach it: "
        "range(0, len(tokens) - block_size + 1, block_size), or block i for i in "
        "range(len(tokens) // block_size)"
    )


def reclaim_refused(d: Difference) -> str | None:
    """Your ``_alloc`` raised OutOfBlocks where the plain free list was empty and the
    evictable list held a block, which the reference reclaims: read off the call's fields
    (what yours did and the rule it breaks; why, no field says)."""
    order, free = d.before.get("reclaim order"), d.before.get("free")
    if d.error("mine") != "OutOfBlocks" or d.they_raised:
        return None
    if not (isinstance(order, list) and order and isinstance(free, list)):
        return None
    if any(b not in order for b in free) or d.returned("theirs") != repr(order[0]):
        return None
    return (
        f"yours raised OutOfBlocks with no plain free block left and block {order[0]} first "
        f"on the evictable list (reclaim order {order}): when the plain free list is empty, "
        "_alloc reclaims the least recently freed cached block (forgetting its hash, tokens "
        "and map entry) and hands it out; OutOfBlocks only when both lists are empty"
    )
