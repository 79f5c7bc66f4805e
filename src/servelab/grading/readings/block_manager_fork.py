"""A fork whose child table lacks the parent's partial last block, read again on a copy where
that block is full: a child that then gets every block was given the full blocks only."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import SAME, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["fork_dropped_tail"]

DROPPED_TAIL = WrittenFor((SAME,), ("tables", "refcounts"))
"""The child's table is the parent's full blocks; the partial last block is neither in it nor
counted for it."""


def _child_table(d: Difference, fill: int) -> tuple[list[Any], list[Any]] | None:
    """On a copy where yours first appends ``fill`` tokens to the parent: (the parent's table,
    the table yours gives a new child); None where that cannot run."""
    parent = d.args[0]
    ids = [s for s in d.before.get("tables", {}) if isinstance(s, int)]
    fresh = max([*ids, d.args[1] if isinstance(d.args[1], int) else 0]) + 1
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            for _ in range(fill):
                obj.append_slot(parent)
            obj.fork(parent, fresh)
            return list(obj.block_table(parent)), list(obj.block_table(fresh))
    except (Exception, OutOfLines):
        return None


def fork_dropped_tail(d: Difference) -> str | None:
    """The child got the parent's full blocks and not its partial last block, which kept its
    count. Said only when, on a copy where yours first fills that last block, the child gets
    every block of the parent: the partial block is what yours leaves out."""
    if d.method != "fork" or len(d.args) < 2:
        return None
    parent, child = d.args[0], d.args[1]
    table = d.before.get("tables", {}).get(parent)
    n = d.before.get("lengths", {}).get(parent)
    size = getattr(d.subject, "block_size", 0)
    got = d.mine.get("tables", {}).get(child)
    if not (isinstance(table, list) and table and type(n) is int and type(size) is int):
        return None
    if size < 1 or n % size == 0 or len(table) != -(-n // size) or not isinstance(got, list):
        return None
    full, last = table[: n // size], table[-1]
    refs_before, refs = d.before.get("refcounts", {}), d.mine.get("refcounts", {})
    if got != full or refs.get(last) != refs_before.get(last):
        return None
    if any(refs.get(b) != refs_before.get(b, 0) + 1 for b in full):
        return None
    filled = _child_table(d, size - n % size)
    if filled is None or filled[0] != filled[1] or len(filled[1]) != len(table):
        return None
    return DROPPED_TAIL.show(
        d,
        f"yours gave the child the parent's full blocks {full} only, leaving out its partial "
        f"last block {last} ({n} tokens, {size} a block), whose refcount stayed "
        f"{refs.get(last)}; made again on a copy where the parent first fills that block "
        f"({n + size - n % size} tokens), the child gets every block: fork shares the partial "
        "last block too, and raises its refcount (the first write into it then copies it)",
    )
