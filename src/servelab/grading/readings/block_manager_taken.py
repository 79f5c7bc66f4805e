"""Which free blocks a block manager hands out, and in which order a table lists them: read off
your ``_alloc`` called again on a copy until the free list is empty, and off the table your
``allocate`` built, beside the free list both started from. Each says what yours did with the
free list's order, in its own blocks, and names no cause it did not see."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import SAME, VALUE, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["taken_order_reading"]

TAKEN_OTHER = WrittenFor((VALUE,), ("tables", "refcounts", "free"))
"""Yours handed out another block than the free list's left end."""
LISTED_OTHER = WrittenFor((SAME,), ("tables",))
TOOK_RIGHT_END = WrittenFor((SAME,), ("tables", "refcounts", "free"))
"""Yours took other blocks than the reference, the same number of them."""
"""Yours took the same blocks as the reference, and only the table's order differs."""


def _handed_out(d: Difference) -> tuple[list[Any], list[Any]] | None:
    """(the free list before the call, the blocks yours hands out calling ``_alloc`` on a
    copy once for each of them); None where it cannot run or hands out anything else."""
    try:
        obj = copy.deepcopy(d.subject)
        free = list(obj.free_list())
        with line_budget(LINES_PER_CALL):
            out = [obj._alloc() for _ in free]
    except (Exception, OutOfLines):
        return None
    return (free, out) if sorted(out) == sorted(free) else None


FRESH = (4, (1, 0))
"""A new manager of 4 blocks of 1 token, and the blocks it holds and then releases (in that
order, as free_seq releases a table [0, 1] tail first): free list [2, 3, 1, 0]."""


def _fresh_handed_out(d: Difference) -> tuple[list[Any], list[Any]] | None:
    """On a new manager of your class (:data:`FRESH`) whose blocks 0 and 1 were held and then
    given to your ``_release``: (its free list, the blocks your ``_alloc`` hands out until it
    is empty); None where it cannot run, or its free list is not [2, 3, 1, 0]."""
    blocks, held = FRESH
    try:
        with line_budget(LINES_PER_CALL):
            obj = type(d.subject)(blocks, 1)
            for b in held:
                obj.free.remove(b)
                obj.ref[b] = 1
            for b in held:
                obj._release(b)
            free = list(obj.free_list())
            if free != [2, 3, 1, 0]:
                return None
            out = [obj._alloc() for _ in free]
    except (Exception, OutOfLines):
        return None
    return (free, out) if sorted(out) == sorted(free) else None


def _order_words(free: list[Any], out: list[Any], rule: str) -> str | None:
    """What ``out`` does with ``free``'s order, where more than two blocks tell it."""
    if len(free) <= 2:
        return None
    k = next((i for i in range(1, len(free)) if out == free[i:] + free[:i]), None)
    if k is not None:
        return (
            f"first {free[k:]}, the right end of the free list (where `_release` puts each "
            f"block it frees), in the order they were put there, and only then {free[:k]}; "
            f"{rule}"
        )
    if out == free[::-1]:
        return f"the free list taken from its right end (pop); {rule}"
    return None


def _alloc_order(d: Difference) -> str | None:
    got = _handed_out(d)
    if got is None:
        return None
    free, out = got
    if not free or out[0] == free[0] or d.returned("mine") != repr(out[0]):
        return None
    said = (
        f"yours, called again on a copy until the free list is empty, hands out {out}, where "
        f"the free list is {free}"
    )
    rule = (
        "blocks leave the free list from its left end (popleft), the block free longest "
        f"first: {free}"
    )
    words = _order_words(free, out, rule)
    if words:
        return f"{said}: {words}"
    fresh = _fresh_handed_out(d) if len(free) <= 2 else None
    longer = _order_words(*fresh, "") if fresh and fresh[1] != fresh[0] else None
    if fresh and longer:
        blocks, held = FRESH
        return (
            f"{said}; on a new manager of {blocks} blocks whose blocks {sorted(held)} were held "
            f"and then released ({held[0]}, then {held[1]}), the free list is {fresh[0]} and "
            f"yours hands out {fresh[1]}: {longer}blocks leave the free list from its left end "
            f"(popleft), the block free longest first: {free} here, {fresh[0]} there"
        )
    return f"{said}; {rule}"


def _table_order(d: Difference) -> str | None:
    seq = d.args[0] if d.args else None
    mine = d.mine.get("tables", {}).get(seq)
    theirs = d.theirs.get("tables", {}).get(seq)
    if not (isinstance(mine, list) and isinstance(theirs, list)) or mine == theirs:
        return None
    free = d.before.get("free")
    if sorted(mine, key=repr) != sorted(theirs, key=repr) and isinstance(free, list):
        if len(mine) < len(free) and mine == free[len(free) - len(mine) :]:
            return TOOK_RIGHT_END.show(
                d,
                f"yours took {mine}, the right end of the free list {free} (where `_release` "
                f"puts each block it frees), in list order: allocate takes its blocks from the "
                f"left end, the blocks free longest first ({theirs})",
            )
        return None
    if sorted(mine, key=repr) != sorted(theirs, key=repr) or len(mine) < 2:
        return None
    rule = (
        "the table lists the blocks in the order `_alloc` hands them out, the free list's "
        f"left end first ({theirs}): logical block i is the i-th block taken"
    )
    if mine == theirs[::-1]:
        return LISTED_OTHER.show(
            d,
            f"yours took the right blocks but lists them as {mine}, the reverse of the order "
            f"they leave the free list's left end; {rule}",
        )
    return LISTED_OTHER.show(
        d, f"yours took the right blocks but lists them as {mine}, another order; {rule}"
    )


def taken_order_reading(d: Difference) -> str | None:
    """An ``_alloc`` that handed out another free block than the left end, in the order your
    ``_alloc`` hands them all out; an ``allocate`` whose table lists the right blocks in
    another order than they were taken."""
    if d.method == "_alloc" and d.my_outcome != d.their_outcome:
        return TAKEN_OTHER.show(d, _alloc_order(d))
    if d.method == "allocate":
        return _table_order(d)
    return None
