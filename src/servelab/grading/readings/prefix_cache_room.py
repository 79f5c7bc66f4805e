"""An ``allocate`` whose all-or-nothing test leaves a prompt's partial last block out of the
blocks it needs, proven on copies of the state before the call: the same number of blocks, the
last one full (the prompt padded to a whole block), is refused with nothing changed, and the
prompt cut to its full blocks is allocated; only the partial block makes yours run out
midway."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import BOTH_RAISED, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["room_left_partial"]

PARTIAL_LEFT_OUT = WrittenFor(
    (BOTH_RAISED,),
    ("tables", "lengths", "refcounts", "free", "num_free", "hashed", "cached", "reclaim order"),
)
"""Both refused the prompt; yours took blocks (or hits) first."""


def _allocate(d: Difference, tokens: list[Any]) -> str | None:
    """How yours ends ``allocate(seq, tokens)`` on a copy of the state before the call:
    "allocated", "refused" (OutOfBlocks, nothing changed), "changed" (OutOfBlocks after taking
    something); None for anything else."""
    try:
        obj = copy.deepcopy(d.subject)
        before = (obj.num_free, copy.deepcopy(obj.tables), list(obj.free_list()))
        with line_budget(LINES_PER_CALL):
            try:
                obj.allocate(d.args[0], tokens)
            except Exception as e:
                if type(e).__name__ != "OutOfBlocks":
                    return None
                after = (obj.num_free, obj.tables, list(obj.free_list()))
                return "refused" if after == before else "changed"
            return "allocated"
    except (Exception, OutOfLines):
        return None


def room_left_partial(d: Difference) -> str | None:
    """Said only where the prompt ends in a partial block, yours ran out midway (both raised
    OutOfBlocks, yours after changing the state) and, on copies, refuses the prompt padded to
    a whole last block with nothing changed and allocates the prompt cut to its full blocks."""
    if d.method != "allocate" or len(d.args) < 2 or not d.differ:
        return None
    if not (d.error("mine") == d.error("theirs") == "OutOfBlocks"):
        return None
    tokens = d.args[1]
    size = getattr(d.subject, "block_size", None)
    if not (isinstance(tokens, list | tuple) and type(size) is int and size > 1):
        return None
    tokens = list(tokens)
    tail = len(tokens) % size
    if not tail or len(tokens) < size:
        return None
    pad = max((t for t in tokens if type(t) is int), default=0) + 1
    padded = tokens + [pad] * (size - tail)
    cut = tokens[: len(tokens) - tail]
    if _allocate(d, tokens) != "changed" or _allocate(d, padded) != "refused":
        return None
    if _allocate(d, cut) != "allocated":
        return None
    blocks = -(-len(tokens) // size)
    return PARTIAL_LEFT_OUT.show(
        d,
        f"yours let this prompt of {len(tokens)} tokens ({blocks} blocks, the last one "
        f"partial) through its test and ran out midway; made again on copies, yours refuses "
        f"the prompt padded to {len(padded)} tokens ({blocks} full blocks) with nothing "
        f"changed, and allocates it cut to its {len(cut)} tokens of full blocks: your "
        "all-or-nothing test leaves the partial last block out of the blocks it needs. Count "
        "every block the prompt fills, ceil(len / block_size), less the hits, and refuse when "
        "that is more than _room(hits)",
    )
