"""Readings of a token-budget chunk's slots: those of its own positions, from its start."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference, call
from servelab.testing.aliasing import held_at

__all__ = ["shared_read", "shared_slots", "slots_call", "slots_read"]


def _slots_of(table: list[Any], size: int, first: int, n: int) -> list[Any] | None:
    """The flat slots of positions first .. first + n - 1, or None past the table's end."""
    if n < 1 or (first + n - 1) // size >= len(table):
        return None
    return [table[p // size] * size + p % size for p in range(first, first + n)]


def _slots_said(said: str, mine: list[Any], table: list[Any], size: int, c: Any) -> str | None:
    """``c`` a (start, num_tokens) pair: the reading of slots ``mine`` given to those positions."""
    start, n = c
    right = _slots_of(table, size, start, n)
    if right is None or mine == right:
        return None
    if start and mine == _slots_of(table, size, 0, n):
        return (
            f"{said} {mine}, those of positions from 0: a chunk writes its own positions, "
            f"start .. start + num_tokens - 1, so its slots are {right} here"
        )
    return (
        f"{said} {mine} where its table puts its positions at {right}: a position p's slot "
        "is table[p // block_size] * block_size + p % block_size"
    )


def _block_size(d: Difference) -> int:
    size = getattr(getattr(d.subject, "bm", None), "block_size", 0)
    return size if isinstance(size, int) else 0


def slots_read(d: Difference, chunks: list[Any]) -> str | None:
    """A chunk's slots are those of its own positions, from its start."""
    tables, size = d.mine.get("tables"), _block_size(d)
    if not isinstance(tables, dict) or size < 1:
        return None
    for c in chunks:
        table = tables.get(c.seq.seq_id)
        if isinstance(table, list):
            said = f"yours gave request {c.seq.seq_id}'s chunk at {c.start} the slots"
            found = _slots_said(said, list(c.slots), table, size, (c.start, c.num_tokens))
            if found is not None:
                return found
    return None


def slots_call(d: Difference) -> str | None:
    """``slots(seq, start, n)`` gives the slots of positions start .. start + n - 1."""
    mine, size = d.probe("slots", *d.args), _block_size(d)
    if len(d.args) != 3 or mine[0] != "returned" or not isinstance(mine[1], list) or size < 1:
        return None
    seq, start, n = d.args
    table = call(getattr(d.subject, "bm", None), "block_table", getattr(seq, "seq_id", None))
    if not isinstance(table, list):
        return None
    return _slots_said(
        f"yours gave positions {start} .. {start + n - 1} the slots",
        mine[1],
        table,
        size,
        (start, n),
    )


def shared_slots(sched: Any, chunks: list[Any]) -> str | None:
    """Where two of ``chunks`` hold one slots list (the same object, not an equal one), or one
    holds a list the scheduler itself keeps: that fact, as what yours "gave" (the words after
    it); else None. Identity is a fact, so the sentence may state it."""
    seen: dict[int, Any] = {}
    for chunk in chunks:
        slots = getattr(chunk, "slots", None)
        if not isinstance(slots, list):
            continue
        other = seen.setdefault(id(slots), chunk)
        if other is not chunk:
            return (
                f"request {other.seq.seq_id}'s chunk and request {chunk.seq.seq_id}'s chunk "
                f"one slots list, the same object: both show {slots}, what was put in it last"
            )
        held = held_at(sched, slots)
        if held is not None:
            return (
                f"request {chunk.seq.seq_id}'s chunk the scheduler's own list sched.{held} as "
                "its slots, the same object: it changes as the scheduler goes on"
            )
    return None


def shared_read(obj: Any, chunks: list[Any]) -> str | None:
    """The call, replayed on a copy, put one slots list in two chunks (or the scheduler's own
    list in one): that fact and the rule it breaks."""
    found = shared_slots(obj, chunks)
    if found is None:
        return None
    return (
        f"replayed on a copy, yours gave {found}. Each chunk needs a slots list of its own: "
        "a new list per chunk (self.slots(seq, start, n) gives one)"
    )
