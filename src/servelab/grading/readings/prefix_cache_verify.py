"""A lookup that took a hit whose stored tokens differ from the prompt's, read again on copies
where the stored tokens of one hit at a time differ: which blocks yours verifies."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["verified_first_only"]


def _found(d: Difference, tokens: list[Any], blocks: list[Any], wrong: int) -> Any:
    """Your ``_lookup`` on a copy where every one of ``blocks`` stores the prompt's tokens but
    block ``blocks[wrong]``, which stores others; None where it cannot run."""
    size = d.subject.block_size
    try:
        obj = copy.deepcopy(d.subject)
        for j, block in enumerate(blocks):
            right = tuple(tokens[j * size : (j + 1) * size])
            obj.tokens[block] = tuple(t + 1 for t in right) if j == wrong else right
        with line_budget(LINES_PER_CALL):
            return list(obj._lookup(list(tokens)))
    except (Exception, OutOfLines):
        return None


def verified_first_only(d: Difference, mine: list[Any], theirs: list[Any]) -> str | None:
    """Yours went past a hit whose stored tokens are not the prompt's, after a first hit.
    Said only when, on copies where the stored tokens of exactly one of your hits differ,
    yours stops at once when it is the first and takes every hit when it is any later one."""
    tokens = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    stored = getattr(d.subject, "tokens", None)
    if not isinstance(tokens, list | tuple) or type(size) is not int or size < 1:
        return None
    i = len(theirs)
    if i < 1 or len(mine) <= i or mine[:i] != theirs or not isinstance(stored, list | dict):
        return None
    try:
        held = stored[mine[i]]
    except (IndexError, KeyError, TypeError):
        return None
    want = tuple(tokens[i * size : (i + 1) * size])
    if held is None or tuple(held) == want:
        return None
    tokens = list(tokens)
    if _found(d, tokens, mine, 0) != []:
        return None
    later = range(1, len(mine))
    if any(_found(d, tokens, mine, j) != mine for j in later):
        return None
    where = "block 1" if len(mine) == 2 else f"blocks 1 to {len(mine) - 1}"
    which = "and not the second" if len(mine) == 2 else "only"
    return (
        f"yours took block {mine[i]} for block {i} of the prompt though it stores "
        f"{list(held)}, not {list(want)}; made again on copies where the stored tokens of one "
        f"hit differ, yours stops at once when that hit is the prompt's first block, and takes "
        f"it at {where}: yours checks the stored tokens of the first hit {which}. A chained "
        "hash can collide at any block, not only the first: verify every hit's stored tokens "
        "and stop at the first that differs"
    )


def stopped_at_unheld(d: Difference, block: Any, at: int, theirs: list[Any]) -> str | None:
    """Yours stopped at cached ``block`` (the prompt's block ``at``), which no table holds.
    Said only when, on a copy where every hit the reference finds has refcount 1, yours finds
    them all: yours takes a hit only while a table holds it."""
    refs = getattr(d.subject, "ref", None)
    tokens = d.args[0] if d.args else None
    if not isinstance(refs, list | dict) or not isinstance(tokens, list | tuple):
        return None
    try:
        if refs[block] != 0:
            return None
        obj = copy.deepcopy(d.subject)
        for b in theirs:
            if obj.ref[b] == 0:
                obj.ref[b] = 1
        with line_budget(LINES_PER_CALL):
            found = list(obj._lookup(list(tokens)))
    except (Exception, OutOfLines):
        return None
    if found != theirs:
        return None
    return (
        f"yours stopped at block {block} (block {at} of the prompt), which no table holds "
        f"(refcount 0); made again on a copy where the cached blocks it should find have "
        f"refcount 1, yours finds them all ({theirs}): yours takes a hit only while a table "
        "holds it. A hit is a block in map that holds the same tokens, whatever its "
        "refcount: a cached block no table holds is still there to be hit"
    )
