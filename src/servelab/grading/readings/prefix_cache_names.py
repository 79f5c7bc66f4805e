"""A chain that names its blocks by another formula than the notebook's, and a lookup that
moves blocks on the evictable LRU: each read off your call (the chain asked again on a copy),
saying what yours did and the rule, and no cause it did not see."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import SAME, Difference, WrittenFor

__all__ = ["chain_other_formula", "lookup_moved"]

ROOT = 0
"""The name the chain starts from, as the notebook's skeleton has it."""
LOOKUP_MOVED = WrittenFor((SAME,), ("free", "reclaim order"))
"""A lookup that returned the reference's hits and reordered the evictable LRU."""


def chain_other_formula(d: Difference) -> str | None:
    """Your ``_chain`` paired every full block with its own tokens, yet named some block by
    other than hash((parent, block_tokens)) over the name yours gave the block before it:
    proven by your chain asked again on a copy, each name recomputed from yours."""
    tokens = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    if not isinstance(tokens, list | tuple) or not isinstance(size, int) or size < 1:
        return None
    outcome, mine = d.probe("_chain", list(tokens))
    if outcome != "returned" or not isinstance(mine, list) or not mine:
        return None
    n = len(tokens) // size
    try:
        pairs = [(m[0], tuple(m[1])) for m in mine]
    except (TypeError, IndexError):
        return None
    if len(pairs) != n or [t for _, t in pairs] != [
        tuple(tokens[i * size : (i + 1) * size]) for i in range(n)
    ]:
        return None
    parent: Any = ROOT
    for i, (h, block_tokens) in enumerate(pairs):
        want = hash((parent, block_tokens))
        if h != want:
            before = f"{parent!r}, yours for block {i - 1}" if i else "ROOT = 0, as it starts"
            return (
                f"yours names block {i} {h!r}, where hash((parent, block_tokens)) over the "
                f"name before it ({before}) is {want!r}: each block's name is exactly "
                "hash((parent, block_tokens)), parent the name of the block before it; "
                "append_slot names a block a decode fills the same way, so a prompt's block "
                "named otherwise never matches one a decode filled"
            )
        parent = h
    return None


def lookup_moved(d: Difference) -> str | None:
    """A ``_lookup`` that found the reference's hits but left the evictable LRU in another
    order than before the call: read off the call."""
    if d.method != "_lookup" or not d.same_outcome:
        return None
    before, mine = d.before.get("reclaim order"), d.mine.get("reclaim order")
    if not (isinstance(before, list) and isinstance(mine, list)):
        return None
    if sorted(before, key=repr) != sorted(mine, key=repr) or before == mine:
        return None
    return LOOKUP_MOVED.show(
        d,
        f"yours found the reference's hits ({d.returned('mine')}) but moved the evictable LRU "
        f"from {before} to {mine}: a lookup only reads; a block moves on that list only when "
        "its last holder frees it (to the newest end) or it leaves it (a hit claims it, "
        "`_alloc` reclaims it), so a num_cached_tokens query changes nothing",
    )
