"""Readings of a weight cache whose pins are kept in a way the skeleton's API does not show: a
key left in ``_pins`` with a count of 0 after its last unpin, read as pinned by a victim
scan that asks whether the key is in ``_pins``; a get of a pinned key that counts no hit.
Each is said only where a copy that differs in that one thing alone behaves as the
reference does."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["pinned_hit_uncounted", "zero_pin_kept", "zero_unpin_let_through"]


def zero_pin_kept(d: Difference, skipped: Any) -> str | None:
    """A victim scan that skipped ``skipped``, whose count in ``_pins`` is 0: said where, on
    a copy with that 0 entry deleted, your ``_next_victim`` names ``skipped``."""
    pins = getattr(d.subject, "_pins", None)
    if not isinstance(pins, dict) or skipped not in pins or pins[skipped] != 0:
        return None
    try:
        twin = copy.deepcopy(d.subject)
        del twin._pins[skipped]
        with line_budget(LINES_PER_CALL):
            named = twin._next_victim()
    except (Exception, OutOfLines):
        return None
    if named != skipped:
        return None
    return (
        f"yours skipped {skipped!r}, whose last pin was released: your unpin left it in "
        f"`_pins` with a count of 0, and your `_next_victim` passes over it as if pinned; on a "
        f"copy with that 0 entry deleted, yours names {skipped!r}. A count of 0 is no pin: "
        "delete the key from `_pins` when its last pin goes, or ask for the count "
        "(`not self._pins.get(key)`) rather than whether the key is in `_pins`"
    )


def pinned_hit_uncounted(d: Difference) -> str | None:
    """A get of a pinned resident key that counted no hit: said where, on a copy with every
    pin of that key released, a get of it counts one hit."""
    key = d.args[0] if d.args else None
    pins = d.before.get("pins", {})
    if d.method != "get" or not isinstance(pins, dict) or not pins.get(key):
        return None
    if key not in d.before.get("resident", ()) or "hits" not in d.differ:
        return None
    mine, theirs = d.mine.get("hits"), d.theirs.get("hits")
    if not isinstance(mine, int) or not isinstance(theirs, int) or mine != theirs - 1:
        return None
    try:
        twin = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            for _ in range(pins[key]):
                twin.unpin(key)
            before = twin.hits
            twin.get(key)
            counted = twin.hits - before
    except (Exception, OutOfLines):
        return None
    if counted != 1:
        return None
    return (
        f"yours counted no hit for {key!r}, which is pinned x{pins[key]}; on a copy with "
        f"those pins released yours counts the hit: a get of a pinned key is a hit like any "
        "other (a pinned entry is resident; only the victim scan passes over it). Count a hit "
        "for every resident key asked for, whether it is pinned or not"
    )


def zero_unpin_let_through(d: Difference) -> str | None:
    """An unpin let through for a key whose count in ``_pins`` is 0: said where, on a copy
    with that 0 entry deleted, your unpin raises what the reference raises."""
    key = d.args[0] if d.args else None
    pins = getattr(d.subject, "_pins", None)
    if d.method != "unpin" or not isinstance(pins, dict) or key not in pins or pins[key] != 0:
        return None
    try:
        twin = copy.deepcopy(d.subject)
        del twin._pins[key]
        with line_budget(LINES_PER_CALL):
            twin.unpin(key)
    except OutOfLines:
        return None
    except Exception as exc:
        if not d.error("theirs").startswith(type(exc).__name__):
            return None
        return (
            f"yours let this unpin of {key!r} through: an earlier unpin left {key!r} in "
            f"`_pins` with a count of 0, and yours takes that entry for a pin; on a copy with "
            f"the 0 entry deleted, yours raises {type(exc).__name__}, as the reference does. A "
            "count of 0 is no pin: delete the key from `_pins` when its last pin goes, or "
            "check the count (`not self._pins.get(key)`), not whether the key is in `_pins`"
        )
    return None
