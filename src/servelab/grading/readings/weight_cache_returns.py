"""Readings of what a weight cache's call returned in place of the reference's answer, said
only where calls of yours on copies return the same thing from other states: a pin() or
unpin() that answers its key's pin count from before the call, a get that answers the
entry's size or the key itself. A pin count one off that no reading proves is shown as the
difference alone: one state with one resident key cannot tell an off by one from another
count."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference, call
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["get_answered_size", "pin_count_shown", "returned_count_before"]


def _before_and_answer(d: Difference, extra: Any, target: Any) -> tuple[int, Any] | None:
    """On a copy (``extra`` pinned once first, where given): ``target``'s pin count before the
    call, and what your call answered; None where it cannot be asked."""
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            if extra is not None:
                obj.pin(extra)
            was = obj.pin_count(target)
            if d.method == "unpin" and not was:
                return None  # an unpin of a key with no pin raises
            return was, getattr(obj, d.method)(target)
    except (Exception, OutOfLines):
        return None


_PIN_RULES = {
    "pin": "pin() returns the pin count after adding this pin (the first pin returns 1)",
    "unpin": "unpin() returns the pins left after removing this one (the last unpin returns 0)",
}


def returned_count_before(d: Difference) -> str | None:
    """A pin() or unpin() that returned its key's pin count from before the call: said where
    yours does so here, on this key once it has one pin more, and on each other resident key
    (up to three; for unpin once pinned), on copies; the count before differs from here in
    one of them at least."""
    if d.method not in ("pin", "unpin") or d.differ or not d.args:
        return None
    key, mine, theirs = d.args[0], d.returned("mine"), d.returned("theirs")
    before = d.before.get("pins")
    if mine is None or theirs is None or mine == theirs or not isinstance(before, dict):
        return None
    was = before.get(key, 0)
    if mine != repr(was):
        return None
    others = [k for k in d.before.get("resident", ()) if k != key][:3]
    seen = set()
    first = key if d.method == "unpin" else None  # an unpin asks a key with a pin
    for extra, target in [(key, key), *((first and o, o) for o in others)]:
        got = _before_and_answer(d, extra, target)
        if got is None or got[1] != got[0]:
            return None
        seen.add(got[0])
    if not seen - {was}:
        return None
    rule = _PIN_RULES[d.method]
    return (
        f"yours returned {mine}, the pins {key!r} had before this {d.method}, where the "
        f"reference returns {theirs}: {rule}; yours answers the count from before the call "
        f"from other states too (one more pin of {key!r}, another key)"
    )


def pin_count_shown(d: Difference) -> str | None:
    """The difference alone, for pin counts one apart that no reading explains."""
    mine, theirs = d.returned("mine"), d.returned("theirs")
    if not (mine or "").isdigit() or not (theirs or "").isdigit():
        return None
    if abs(int(mine or 0) - int(theirs or 0)) != 1:
        return None
    if not d.differ and d.method in _PIN_RULES:  # the pins moved as the reference's did
        return (
            f"yours changed the pins as the reference does but returned {mine}, not "
            f"{theirs}: {_PIN_RULES[d.method]}"
        )
    return f"yours returned {mine}, the reference {theirs}"


def _answered_key(d: Difference, key: Any, resident: list[Any], theirs: str) -> str | None:
    """A get that returned its key: said where a get of yours on a copy of another resident
    key answers that key too."""
    for other in (k for k in resident if k != key):
        try:
            twin = copy.deepcopy(d.subject)
            with line_budget(LINES_PER_CALL):
                answer = twin.get(other)
        except (Exception, OutOfLines):
            continue
        if answer == other:
            return (
                f"yours returned {key!r}, the key asked for, where the reference returns its "
                f"value {theirs}; a get of {other!r} on a copy answers {other!r} too: get "
                "returns the value stored under the key, the [1] of its (size, value) entry"
            )
    return None


def get_answered_size(d: Difference) -> str | None:
    """A get that returned the entry's size where the reference returns its value: said where
    a get of yours on a copy answers another resident key's size, one that differs from this
    key's size and from that key's value."""
    if d.method != "get" or not d.args:
        return None
    key, mine, theirs = d.args[0], d.returned("mine"), d.returned("theirs")
    resident = list(d.before.get("resident", ()))
    if mine == repr(key) and theirs is not None and mine != theirs:
        return _answered_key(d, key, resident, theirs)
    size = call(d.subject, "size_of", key) if key in resident else None
    if not isinstance(size, int) or mine != repr(size) or theirs is None or mine == theirs:
        return None
    for other in resident:
        if other == key:
            continue
        its = call(d.subject, "size_of", other)
        if not isinstance(its, int) or its == size:
            continue
        try:
            twin = copy.deepcopy(d.subject)
            with line_budget(LINES_PER_CALL):
                answer = twin.get(other)
        except (Exception, OutOfLines):
            continue
        if answer == its and not isinstance(answer, bool):
            return (
                f"yours returned {mine}, the size stored for {key!r}, where the reference "
                f"returns its value {theirs}; a get of {other!r} on a copy answers {its}, "
                "its size too: an entry is kept as (size, value), and get returns the value, "
                "its [1]"
            )
    return None
