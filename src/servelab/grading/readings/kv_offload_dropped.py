"""A reading of an unpin() or unref() that took its key out of ``pins`` or ``refs`` while one
was left (the reference leaves 1): the same call on a copy whose key holds one more keeps the
key, so yours drops it at 1 where it belongs at 0, a threshold one too high."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["dropped_at_one"]

_FIELD = {"unpin": ("pins", "pin", "pin"), "unref": ("refs", "ref", "transfer")}
# what each count method answers for a key holding 2 in the field (a tier's own reference: +1)
_TWO = {"pins": ("pin_count", 2), "refs": ("ref_count", 3)}


def _kept_from_one_more(d: Difference, key: Any, field: str, more: str) -> bool:
    """Your call again on a copy whose ``key`` got one more ``more()`` first: your count method
    then answers 2 in ``field`` for the key, 1 more than the reference leaves here."""
    count, two = _TWO[field]
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            getattr(obj, more)(key)
            getattr(obj, d.method)(key)
            return bool(getattr(obj, count)(key) == two)
    except (Exception, OutOfLines):
        return False


def dropped_at_one(d: Difference) -> str | None:
    """Yours took the key out of ``pins``/``refs`` where the reference leaves 1, and keeps it
    (at 2) from one more: an entry leaves only when its count reaches 0."""
    if d.method not in _FIELD or not d.args or d.i_raised or d.they_raised:
        return None
    field, more, noun = _FIELD[d.method]
    key = d.args[0]
    had, mine, theirs = (x.get(field) for x in (d.before, d.mine, d.theirs))
    if not (isinstance(had, dict) and isinstance(mine, dict) and isinstance(theirs, dict)):
        return None
    if key in mine or theirs.get(key) != 1 or had.get(key) != 2:
        return None
    if not _kept_from_one_more(d, key, field, more):
        return None
    return (
        f"yours took {key!r} out of `{field}` with one {noun} still left (2 -> none), where the "
        f"reference leaves 1, yet from 3 (on a copy) yours leaves 2: a key leaves `{field}` only "
        "when its count reaches 0; does yours keep it only while more than one is left?"
    )
