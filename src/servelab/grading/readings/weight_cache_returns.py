"""Readings of what a weight cache's call returned in place of the reference's answer, said
only where calls of yours on copies return the same thing from other states: a pin() or
unpin() that answers its key's pin count from before the call, a get that answers the
entry's size or the key itself, a pin() or unpin() that answers whether its key is pinned
(a bool), an unpin that answers None for the last pin, a get that answers the newest
entry's value. A pin count one off that no reading proves is shown as the
difference alone: one state with one resident key cannot tell an off by one from another
count."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference, call
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = [
    "get_answered_newest",
    "get_answered_size",
    "none_at_last_unpin",
    "pin_count_shown",
    "replacement_kept",
    "returned_bool",
    "returned_count_before",
]


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


def _answers(d: Difference, steps: int, extra: int, target: Any) -> Any:
    """On a copy: ``target`` pinned ``extra`` times more, then unpinned ``steps`` times, then
    your ``d.method`` called on it: what that call returns (None where it cannot run)."""
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            for _ in range(extra):
                obj.pin(target)
            for _ in range(steps):
                obj.unpin(target)
            return getattr(obj, d.method)(target)
    except (Exception, OutOfLines):
        return None


def returned_bool(d: Difference) -> str | None:
    """A pin() or unpin() that answered True where the reference answers a count of 2 or
    more: said where yours answers True on a copy with one pin more too, and, for unpin,
    False for the last pin of the key on a copy: a bool, whether the key is still pinned."""
    if d.method not in ("pin", "unpin") or d.differ or not d.args:
        return None
    key, mine, theirs = d.args[0], d.returned("mine"), d.returned("theirs")
    before = d.before.get("pins")
    if mine != "True" or not (theirs or "").isdigit() or int(theirs or 0) < 2:
        return None
    if not isinstance(before, dict) or not isinstance(before.get(key), int):
        return None
    if _answers(d, 0, 1, key) is not True:
        return None
    if d.method == "unpin":
        if _answers(d, before[key] - 1, 0, key) is not False:
            return None
        seen = "; on copies yours answers True with one pin more and False for the last unpin"
        rule = "unpin() returns the pins left after removing this one (the last unpin returns 0)"
    else:
        seen = "; on a copy with one pin more yours answers True again"
        rule = "pin() returns the pin count after adding this pin (the first pin returns 1)"
    return (
        f"yours returned True where the reference returns {theirs}, the pins {key!r} "
        f"{'has left' if d.method == 'unpin' else 'has now'}{seen}: yours answers whether "
        f"{key!r} is still pinned, a bool, not how many pins it has. {rule}. True equals 1 "
        "in Python, so yours agrees wherever one pin is the answer, and only a second pin "
        "tells them apart"
    )


def none_at_last_unpin(d: Difference) -> str | None:
    """An unpin that answered None where the reference answers 0 (the last pin went): said
    where on a copy with one pin more yours answers the pins left, as the reference does."""
    if d.method != "unpin" or d.differ or not d.args:
        return None
    key, mine, theirs = d.args[0], d.returned("mine"), d.returned("theirs")
    before = d.before.get("pins")
    if mine != "None" or theirs != "0" or not isinstance(before, dict):
        return None
    if before.get(key) != 1:
        return None
    answer = _answers(d, 0, 1, key)
    if answer != 1 or isinstance(answer, bool):
        return None
    return (
        f"yours returned None for the last unpin of {key!r}, where the reference returns 0, "
        f"the pins left; on a copy with one pin more yours answers 1, as the reference does: "
        "only the count that reaches 0 comes back as None. unpin() returns the pins left "
        "after removing this one, 0 for the last: a key with no pin left has a count of 0, "
        "even once it is gone from the dict of pins"
    )


def get_answered_newest(d: Difference) -> str | None:
    """A get that answered the value of the entry that was the most recently used before it,
    not its own key's: said where, on a copy after a put of a new key (no eviction), a get of
    the same key answers the new key's value."""
    if d.method != "get" or not d.args:
        return None
    key, mine, theirs = d.args[0], d.returned("mine"), d.returned("theirs")
    resident = list(d.before.get("resident", ()))
    if key not in resident or resident[-1] == key or mine is None or mine == theirs:
        return None
    newest = resident[-1]
    cache, used = d.subject, d.before.get("used")
    capacity = getattr(cache, "capacity", None)
    if not isinstance(used, int) or not isinstance(capacity, int) or used + 1 > capacity:
        return None
    probe = "<~newest weights>"
    try:
        twin = copy.deepcopy(cache)
        own = copy.deepcopy(cache)
        with line_budget(LINES_PER_CALL):
            twin.put("~newest", probe, 1)
            if list(twin.keys()) != [*resident, "~newest"]:
                return None
            answer = twin.get(key)
            its = own.get(newest)
    except (Exception, OutOfLines):
        return None
    if answer != probe or repr(its) != mine:
        return None
    return (
        f"yours returned {mine}, the value of {newest!r}, the most recently used entry before "
        f"this get, where the reference returns {theirs}, the value stored under {key!r}; on a "
        f"copy after a put of a new key, a get of {key!r} answers the new key's value: yours "
        "answers the newest entry's value, whichever key is asked for. get returns the value "
        "stored under its own key, the [1] of that key's (size, value) entry"
    )


def replacement_kept(impl: Any) -> frozenset[str]:
    """On a new cache of ``impl`` (100 bytes): a key put with 10 bytes, then again with 20
    bytes and another value: what the replacement kept of the first put, ``value`` (a get
    answers the first value) and ``size`` (used is not 20); empty where it cannot run."""
    try:
        with line_budget(LINES_PER_CALL):
            cache = impl(100)
            cache.put("~k", "<first value>", 10)
            cache.put("~k", "<second value>", 20)
            value, used = cache.get("~k"), cache.used
    except (Exception, OutOfLines):
        return frozenset()
    kept = {"value"} if value == "<first value>" else set()
    if used != 20:
        kept.add("size")
    return frozenset(kept)
