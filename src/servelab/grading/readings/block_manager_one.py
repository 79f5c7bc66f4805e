"""An ``append_slot`` that goes wrong only where blocks hold one token, proven on fresh
managers of yours and the reference's: the same allocates and appends agree at block sizes 2,
3 and 4 and part at block size 1. With one-token blocks every append is on a boundary, so a
test for a new block that never holds there is what the replay points at; it is asked about,
not claimed."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import (
    MINE_RAISED,
    SAME,
    VALUE,
    Difference,
    WrittenFor,
)
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["one_token_blocks"]

NO_BLOCK = WrittenFor(
    (SAME, VALUE, MINE_RAISED), ("tables", "refcounts", "free", "num_free", "lengths")
)
"""The append took no block where the reference takes one."""

SIZES = (1, 2, 3, 4)
NUM_BLOCKS = 16


def _trace(cls: type, size: int, start: int) -> list[Any]:
    """What ``cls`` does on a fresh manager of ``size``-token blocks: ``allocate(0, start)``,
    then appends up to three blocks' worth of tokens, each slot and table after it; a raise
    ends the trace with its type's name."""
    seen: list[Any] = []
    try:
        with line_budget(LINES_PER_CALL):
            bm = cls(NUM_BLOCKS, size)
            bm.allocate(0, start)
            seen.append(list(bm.block_table(0)))
            for _ in range(3 * size - start + 1):
                slot = bm.append_slot(0)
                seen.append((tuple(slot), list(bm.block_table(0))))
    except OutOfLines:
        seen.append("out of lines")
    except Exception as e:
        seen.append(type(e).__name__)
    return seen


def _agrees(mine: type, ref: type, size: int) -> bool:
    return all(_trace(mine, size, n) == _trace(ref, size, n) for n in range(2 * size + 1))


def one_token_blocks(d: Difference) -> str | None:
    """An ``append_slot`` at block size 1 that took no block where the reference takes one.
    Said only where, on fresh managers, yours agrees with the reference at block sizes 2, 3
    and 4 (every start length up to two blocks, then appends) and parts at block size 1."""
    if d.method != "append_slot" or not d.args or d.reference is None:
        return None
    if getattr(d.subject, "block_size", None) != 1:
        return None
    seq = d.args[0]
    before = d.before.get("tables", {}).get(seq)
    mine, theirs = d.mine.get("tables", {}).get(seq), d.theirs.get("tables", {}).get(seq)
    if not (isinstance(before, list) and isinstance(theirs, list)):
        return None
    if len(theirs) != len(before) + 1:
        return None
    if mine is not None and (not isinstance(mine, list) or len(mine) != len(before)):
        return None
    if d.i_raised and mine is None:
        mine = before
    if mine != before:
        return None
    yours = type(d.subject)
    if _agrees(yours, d.reference, 1):
        return None
    if not all(_agrees(yours, d.reference, size) for size in SIZES[1:]):
        return None
    n = d.before.get("lengths", {}).get(seq)
    return NO_BLOCK.show(
        d,
        f"yours took no new block for this append at length {n}, with blocks of one token; "
        "made again on fresh managers, yours and the reference agree at block sizes 2, 3 and "
        "4 (allocate 0 to two blocks' worth of tokens, then append three blocks' worth) and "
        "part only at block size 1. With one-token blocks every append is on a boundary "
        "(n % 1 == 0 for every n) and takes a new block: does your test for a new block "
        "never hold when block_size is 1 (`(n + 1) % block_size == 1`, say)? The rule is "
        "`n % block_size == 0`",
    )
