"""A block manager's documented error raised on a call the reference runs: the ids and length
the call names, and which ids the manager held before it, show the check that asked wrong."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from servelab.grading.readings.difference import MINE_RAISED, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

RAISED_WRONGLY = WrittenFor((MINE_RAISED,), ("tables", "lengths", "refcounts", "free", "num_free"))
"""Yours raised where the reference runs, and what running it changed."""


def wrong_error_reading(d: Difference) -> str | None:
    """Yours raised UnknownSequence, SequenceExists or InvalidLength where the call is valid,
    read off the call's own arguments and the tables before it (nothing inferred)."""
    held = d.before.get("tables")
    if not isinstance(held, Mapping) or not d.args:
        return None
    text = _said(d, d.error("mine"), held)
    return RAISED_WRONGLY.show(d, text)


def _said(d: Difference, error: str, held: Mapping[Any, Any]) -> str | None:
    m, args = d.method, d.args
    call = f"{m}({', '.join(map(repr, args))})"
    if m == "fork" and len(args) > 1 and args[0] in held and args[1] not in held:
        parent, child = args[0], args[1]
        if error == "SequenceExists":
            return (
                f"yours raised SequenceExists for {call}, though the child {child} is not "
                f"allocated; {parent}, the one of the two allocated, is the parent: fork raises "
                "SequenceExists only for a child already allocated, and UnknownSequence only "
                "for a parent that is not"
            )
        if error == "UnknownSequence":
            return (
                f"yours raised UnknownSequence for {call}, though the parent {parent} is "
                f"allocated; {child}, the one not allocated, is the child, as a fork's child "
                "must be: fork raises UnknownSequence only for a parent that is not allocated"
            )
    known = m in ("append_slot", "free_seq", "_known") and args[0] in held
    if known and error == "UnknownSequence":
        return _empty_refused(d, args[0], held) or (
            f"yours raised UnknownSequence for {call}, though sequence {args[0]} is allocated "
            f"(tables before the call hold it): raise it only for an id the manager does not hold"
        )
    if m == "allocate" and args[0] not in held and error == "SequenceExists":
        return (
            f"yours raised SequenceExists for {call}, though sequence {args[0]} is not "
            "allocated (tables before the call do not hold it): raise it only for an id the "
            "manager already holds"
        )
    n = args[1] if len(args) > 1 else None
    fine = isinstance(n, int) and not isinstance(n, bool) and n >= 0
    if m == "allocate" and error == "InvalidLength" and fine:
        return (
            f"yours raised InvalidLength for {call}, though {n} is a non-negative int: raise it "
            "only for a count that is not an int, or is below 0 (zero tokens is a valid length)"
        )
    return None


def _empty_refused(d: Difference, seq: Any, held: Mapping[Any, Any]) -> str | None:
    """Yours raised UnknownSequence for an allocated sequence whose table is empty (0 tokens
    hold no block): said only when the same call, on a copy where that table holds one block
    (taken off the free list, counted), raises nothing, so the empty table is what it refuses."""
    if held.get(seq) != []:
        return None
    try:
        obj = copy.deepcopy(d.subject)
        block = obj.free[0]
        obj.free.remove(block)
        obj.ref[block] += 1
        obj.tables[seq].append(block)
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(*d.args)
    except (Exception, OutOfLines):
        return None
    return (
        f"yours raised UnknownSequence for sequence {seq}, which is allocated: its table is "
        f"there, empty (sequence {seq} has 0 tokens, so no block). Made again on a copy where "
        "its table holds one block, the same call raises nothing: yours takes an empty table "
        "for a missing one. A sequence is known when its id is in the tables (seq in "
        "self.tables), whatever its table holds"
    )
