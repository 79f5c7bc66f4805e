"""Readings of a tier's, disk tier's or hierarchy's first diverging call whose cause a second
call proves: a put that reads a victim it has already discarded, a store that touches the copy
a tier below holds. Each re-runs yours on a copy (or a fresh object of your class) where that
cause, and no other, gives the answer it checks for."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget


def _read_after_discard(d: Difference) -> str | None:
    """Yours raised a lookup error on a put the reference completes: replayed on a copy with
    ``_read`` watched, yours read a chunk after taking it out of ``keys`` in that same put."""
    if not d.i_raised or d.they_raised or not d.error("mine").startswith("KeyError"):
        return None
    try:
        tier = copy.deepcopy(d.subject)
        own, late = tier._read, []

        def watched(key: Any) -> Any:
            if key not in tier:
                late.append(key)
            return own(key)

        tier._read = watched
        with line_budget(LINES_PER_CALL):
            tier.put(*d.args)
    except OutOfLines:
        return None
    except Exception:  # the error is the one the call under where: raised
        pass
    if not late:
        return None
    return (
        f"yours read {late[0]!r} with `_read` after this same put had taken it out of `keys` "
        "(a replay of the call watched the reads): read each victim's payload for the answer "
        "first, then `_discard` the victims"
    )


def _store_refreshed_below(d: Difference) -> str | None:
    """Yours left a tier below in another order than the reference: a fresh hierarchy of your
    class, its disk tier holding 'x' then 'y' and its CPU tier empty, stores 'x' and yours
    moves 'x' to the disk tier's newest end (a put or a get of the copy there, say)."""
    if d.i_raised or d.they_raised:
        return None
    lower = [n for n in d.differ if n.endswith(".keys") and not n.startswith("cpu.")]
    if not lower:
        return None
    try:
        h = type(d.subject)(1000, 1000)
        disk = h.tiers[1]
        disk.put("x", b"x" * 10)
        disk.put("y", b"y" * 10)
        with line_budget(LINES_PER_CALL):
            h.store("x", b"x" * 10)
        moved = list(disk.keys()) == ["y", "x"] and "x" in h.tiers[0]
    except (Exception, OutOfLines):
        return None
    if not moved:
        return None
    return (
        "yours touches the copy a tier below already holds: a replay stored 'x' into an "
        "empty CPU tier, and yours moved the disk tier's copy of 'x' to its newest end. A "
        "store writes into the CPU tier only; a tier below changes only by taking what the "
        "tier above evicts"
    )


PROOFS = {
    "put": (_read_after_discard,),
    "store": (_store_refreshed_below,),
}
