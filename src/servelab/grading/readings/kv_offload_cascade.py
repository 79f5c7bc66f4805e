"""A reading of a cascade that left a victim out of the tier below, where that tier's own put,
made on a copy, stores it by evicting: the victim fit the tier's capacity, not its free bytes."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["victim_left_out"]


def _put_on_copy(d: Difference, index: int, key: Any, payload: Any) -> list[Any] | None:
    """The keys your tier ``index`` evicts when its own put stores ``key`` on a copy of the
    hierarchy as it was before the call; None when that put does not store it."""
    try:
        obj = copy.deepcopy(d.subject)
        tier = obj.tiers[index]
        was = list(tier.keys())
        with line_budget(LINES_PER_CALL):
            tier.put(key, payload)
        now = list(tier.keys())
    except (Exception, OutOfLines):
        return None
    return [k for k in was if k not in now] if key in now else None


def victim_left_out(d: Difference) -> str | None:
    """Yours left a victim out of the tier below where the reference writes it there, and
    that tier of yours, on a copy, stores it by evicting: so it fit that tier's capacity."""
    if d.method != "_cascade" or len(d.args) != 2 or d.i_raised or d.they_raised:
        return None
    start, chunks = d.args
    tiers = getattr(d.subject, "tiers", None)
    if not isinstance(start, int) or not isinstance(chunks, list) or not tiers:
        return None
    if not 0 <= start < len(tiers):
        return None
    name = getattr(tiers[start], "name", "?")
    mine, theirs = d.mine.get(f"{name}.keys") or [], d.theirs.get(f"{name}.keys") or []
    for chunk in chunks:
        if not (isinstance(chunk, tuple) and len(chunk) == 2):
            return None
        key, payload = chunk
        if key not in theirs or key in mine or not isinstance(payload, bytes | bytearray):
            continue
        capacity, used = getattr(tiers[start], "capacity", None), d.before.get(f"{name}.used")
        if not isinstance(capacity, int) or not isinstance(used, int):
            return None
        if not capacity - used < len(payload) <= capacity:
            return None
        evicted = _put_on_copy(d, start, key, payload)
        if not evicted:
            return None
        return (
            f"yours left {key!r} ({len(payload)} bytes) out of the {name} tier, where "
            f"{capacity - used} of its {capacity} bytes were free; on a copy, your {name} "
            f"tier's own put({key!r}, ...) stores it, evicting {', '.join(map(repr, evicted))}. "
            "A victim goes down into the tier below whenever it fits that tier's capacity "
            "(len(payload) <= tier.capacity): the tier's put evicts to make room"
        )
    return None
