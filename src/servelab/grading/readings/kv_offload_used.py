"""A reading of a put whose keys and answer agree with the reference's while ``used`` ends at
the victims' bytes taken off and the stored chunk's size never added (a victim's bytes left in
``used`` has its own reading): said with the path, where a copy shows a put with room adding it."""

from __future__ import annotations

import copy
from typing import Any, TypeGuard

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["used_on_put"]


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def used_on_put(d: Difference) -> str | None:
    """A put that evicted what the reference evicts and moved ``used`` by the victims' bytes
    alone: the chunk's size never added."""
    if d.method != "put" or d.differ != {"used"} or d.i_raised or len(d.args) < 2:
        return None
    size = len(d.args[1]) if isinstance(d.args[1], bytes | bytearray) else None
    before, mine, theirs = (x.get("used") for x in (d.before, d.mine, d.theirs))
    keys_before, keys_after = d.before.get("keys"), d.theirs.get("keys")
    if size is None or not (_int(before) and _int(mine) and _int(theirs)):
        return None
    if not isinstance(keys_before, list) or not isinstance(keys_after, list):
        return None
    gone = [k for k in keys_before if k not in keys_after]
    freed = before + size - theirs  # the victims' bytes, by the reference's count
    if not gone or freed <= 0 or mine != before - freed:
        return None
    victims = ", ".join(repr(k) for k in gone)
    path = " on a put that evicts (a put that evicts nothing adds it, on a copy)"
    return (
        f"yours took the bytes of {victims} ({freed}) off `used` but never added the "
        f"{size} bytes of {d.args[0]!r}, the chunk stored{path if _adds_when_room(d) else ''}"
        f": a put adds the chunk's size whether or not it evicted to make room"
    )


def _adds_when_room(d: Difference) -> bool:
    """Whether your put of a new one-byte chunk, on a copy of the tier as it was before the
    call and with a byte free, adds that byte to ``used``."""
    capacity, used = getattr(d.subject, "capacity", None), d.before.get("used")
    if not _int(capacity) or not _int(used) or capacity - used < 1:
        return False
    try:
        tier = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            answer = tier.put("~one-byte", b"x", *d.args[2:])
            after = tier.used
    except (Exception, OutOfLines):
        return False
    return answer == [] and _int(after) and after == used + 1
