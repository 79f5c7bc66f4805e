"""A ``free_seq`` that leaves some of a table's blocks held because it takes entries out of the
table while a loop walks that same list, proven on two copies of the state before the call: on
one, the table is a list that notes its length at each turn of a walk (it shrinks mid-walk);
on the other, a walk over the table goes over a snapshot taken as the walk starts, and yours
then releases every entry. Nothing is said where either copy shows otherwise."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["walk_skipped"]


class _Noted(list):  # type: ignore[type-arg]
    """A list whose walks note its length as they start and after each entry they hand out."""

    def __init__(self, items: Any) -> None:
        super().__init__(items)
        self.lengths: list[int] = []

    def __iter__(self) -> Iterator[Any]:
        i = 0
        self.lengths.append(len(self))
        while i < len(self):
            yield self[i]
            i += 1
            self.lengths.append(len(self))


class _Snapshot(list):  # type: ignore[type-arg]
    """A list whose walks go over a copy of it taken as the walk starts."""

    def __iter__(self) -> Iterator[Any]:
        return iter([*list.__iter__(self)])


def _run(d: Difference, seq: Any, table: list[Any], kind: type) -> tuple[Any, Any] | None:
    """(the copy after yours, the table object it walked) for ``free_seq(seq)`` on a copy whose
    table is a ``kind``; None where that cannot run."""
    try:
        obj = copy.deepcopy(d.subject)
        tables = obj.tables
        if list(tables[seq]) != table:
            return None
        walked = kind(tables[seq])
        tables[seq] = walked
        with line_budget(LINES_PER_CALL):
            obj.free_seq(seq)
        return obj, walked
    except (Exception, OutOfLines):
        return None


def walk_skipped(d: Difference, left: list[Any]) -> str | None:
    """``free_seq`` left the blocks ``left`` held. Said only where (a) on a copy whose table
    notes its length as a loop walks it, the table grew shorter during the walk, and (b) on a
    copy where that walk goes over a snapshot of the table, yours releases one reference per
    entry of the table, every block."""
    if d.method != "free_seq" or not d.args or not left:
        return None
    seq = d.args[0]
    table = d.before.get("tables", {}).get(seq)
    refs_before = d.before.get("refcounts", {})
    if not (isinstance(table, list) and len(table) > 1 and all(type(b) is int for b in table)):
        return None
    noted = _run(d, seq, table, _Noted)
    if noted is None:
        return None
    lengths = noted[1].lengths
    if not lengths or lengths[0] != len(table) or min(lengths) >= len(table):
        return None
    snap = _run(d, seq, table, _Snapshot)
    if snap is None:
        return None
    try:
        after = {b: snap[0].refcount(b) for b in table}
    except Exception:
        return None
    if any(after[b] != refs_before.get(b, 0) - table.count(b) for b in table):
        return None
    kept = ", ".join(map(str, left))
    which = "block" if len(left) == 1 else "blocks"
    return (
        f"yours left {which} {kept} of sequence {seq}'s table {table} held: your free_seq "
        "takes entries out of the table while a loop walks that same list, and the loop does "
        "not reach every entry (made again on copies: the table shrank mid-walk, from "
        f"{lengths[0]} entries to {min(lengths)}; where the loop walks a snapshot of the table "
        "instead, yours releases every block). Walk a copy (`for block in list(table)`), or "
        "release every entry first and drop the table after"
    )
