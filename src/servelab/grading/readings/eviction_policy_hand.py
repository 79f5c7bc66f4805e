"""Readings of a SIEVE removal under the hand that moved the hand to another key than the
next newer one: a key further on (one key passed over, proven on a new policy of yours with
more keys after the hand), or past pinned keys (proven on a copy with them unpinned); and where
a sweep that chose another victim seems to start (:func:`sweep_start`)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from servelab.grading.readings.difference import SAME, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

HAND_PASSED = WrittenFor((SAME,), ("hand", "eviction order"))
"""A removal under the hand that set the hand past the next newer key."""

KEYS = ("a", "b", "c", "d", "e", "f")


def _hand_after(make: Any) -> Any:
    """The hand after ``make()``'s removal; a tuple (never a key) when it raises or runs long."""
    try:
        with line_budget(4 * LINES_PER_CALL):
            return make()
    except (Exception, OutOfLines):
        return ("no answer",)


def _removed_in_new(cls: Any, under: str) -> Any:
    """A new policy of your class given the keys ``KEYS``, the hand set on ``under`` as a
    sweep leaves it, then ``update_on_remove(under)``: where yours leaves the hand."""

    def run() -> Any:
        p = cls()
        for key in KEYS:
            p.update_on_put(key, 1)
        p.hand = under
        p.update_on_remove(under)
        return p.hand

    return _hand_after(run)


def _unpinned_removal(d: Difference, keys: list[Any]) -> Any:
    """Your update_on_remove on a copy of the state before the call with ``keys`` unpinned."""

    def run() -> Any:
        p = copy.deepcopy(d.subject)
        for key in keys:
            p.update_on_unpin(key)
        p.update_on_remove(*d.args)
        return p.hand

    return _hand_after(run)


def hand_passed(d: Difference) -> str | None:
    """update_on_remove of the key under the hand (not the newest) that set the hand past
    the next newer key, where the reference sets it on that key."""
    if d.method != "update_on_remove" or "hand" not in d.differ or not d.args:
        return None
    key, p = d.args[0], d.subject
    queue, hand = getattr(p, "queue", None), getattr(p, "hand", None)
    if not isinstance(queue, list) or key != hand or key not in queue:
        return None
    i = queue.index(key)
    if i + 1 >= len(queue) or d.theirs.get("hand") != queue[i + 1]:
        return None
    nxt, mine, pinned = queue[i + 1], d.mine.get("hand"), set(getattr(p, "pinned", ()))
    rule = (
        "when the cache removes the key under the hand, the hand moves on to the next newer "
        f"key, here {nxt!r}"
    )
    after = [k for k in queue[i + 1 :] if k not in pinned]
    if nxt in pinned and mine == (after[0] if after else None):
        keys = list(itertools.takewhile(pinned.__contains__, queue[i + 1 :]))
        if _unpinned_removal(d, keys) != nxt:
            return None
        shown = ", ".join(map(repr, keys))
        return HAND_PASSED.show(
            d,
            f"yours moved the hand past pinned {shown} to {mine!r}; on a copy with {shown} "
            f"unpinned first, yours moves it onto {nxt!r}. {rule[:1].upper()}{rule[1:]}, "
            "pinned or not: only the sweep passes over a pinned key, and the hand may rest "
            "on one",
        )
    if i + 2 >= len(queue) or mine != queue[i + 2]:
        return None
    if _removed_in_new(type(p), "b") != "d" or _removed_in_new(type(p), "c") != "e":
        return None
    return HAND_PASSED.show(
        d,
        f"yours moved the hand to {mine!r}, two keys newer than {key!r}, passing over {nxt!r}; "
        f"a new policy of yours with {', '.join(map(repr, KEYS))} does the same (removing "
        f"'b' under the hand leaves it on 'd', removing 'c' leaves it on 'e'). {rule[:1].upper()}"
        f"{rule[1:]}. Once {key!r} is deleted from the queue, {nxt!r} stands at the index "
        f"{key!r} had: does yours read the key after that index once {key!r} is gone?",
    )


def _first_candidate(p: Any, start: int) -> Any:
    """The first key a sweep from queue index ``start`` would evict (unpinned, unvisited)."""
    queue, visited, pinned = list(p.queue), dict(p.visited), set(p.pinned)
    for key in queue[start:] + queue[:start]:
        if key not in pinned and not visited.get(key):
            return key
    return None


def sweep_start(d: Difference, hand: Any, chosen: str) -> str:
    """Where yours seems to start its sweep, asked: one past the hand, or at the oldest key."""
    after = d.after()
    try:
        i = list(after.queue).index(hand)
        past, oldest = _first_candidate(after, i + 1), _first_candidate(after, 0)
    except Exception:
        return ""
    if repr(past) == repr(chosen) and repr(oldest) != repr(chosen):
        return ": does yours start one past it?"
    if repr(oldest) == repr(chosen) and repr(past) != repr(chosen):
        return ": does yours start again at the oldest key?"
    return ""
