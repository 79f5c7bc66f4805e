"""A reading of a ``pop_victim`` whose answer is not the key it evicted: the call replayed on a
copy of yours shows which key left the keys the policy tracks (SIEVE's ``queue`` and
``visited``, LFU's ``count`` and ``reached``) and what it returned. The caller deletes the
returned key from the cache, so the two must be the same."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["removal", "returned_not_removed", "taken"]

# the fields that hold one entry per key a policy tracks, with the name a learner reads
TRACKED = ("queue", "visited", "count", "reached")


def _tracked(p: Any) -> dict[str, set[Any]] | None:
    """The keys each field in TRACKED holds (a list, a dict's keys or a set), by name; None
    where ``p`` has none of them."""
    out: dict[str, set[Any]] = {}
    for name in TRACKED:
        held = getattr(p, name, None)
        if isinstance(held, list | dict | set | frozenset):
            try:
                out[name] = set(held)
            except TypeError:  # an unhashable entry: not a plain collection of keys
                return None
    return out or None


def removal(d: Difference) -> tuple[Any, list[Any], Any] | None:
    """Your pop_victim replayed on a copy of the object as it was before the call: (the value
    it returned, the keys that left some tracked field, the hand after the call); None where
    the replay cannot run or returns another value than the graded call did."""
    if d.subject is None or not d.my_outcome.startswith("returned"):
        return None
    before = _tracked(d.subject)
    if before is None:
        return None
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            value = obj.pop_victim()
    except (Exception, OutOfLines):
        return None
    after = _tracked(obj)
    if after is None or repr(value) != d.returned("mine"):
        return None
    gone: set[Any] = set()
    for name, keys in before.items():
        gone |= keys - after.get(name, set())
    try:
        left = sorted(gone)
    except TypeError:
        left = sorted(gone, key=repr)
    return value, left, getattr(obj, "hand", None)


def returned_not_removed(d: Difference) -> str | None:
    """Said only where the replay shows one key gone from the tracked fields and another value
    returned: what yours removed and what it returned (the reference's victim, and the hand,
    named only where the replay shows them equal to it)."""
    found = removal(d)
    if found is None:
        return None
    value, gone, hand = found
    if len(gone) != 1 or gone[0] == value:
        return None
    key = gone[0]
    fields = " and ".join(
        f"`{n}`" for n in TRACKED if key in (_tracked(d.subject) or {}).get(n, set())
    )
    theirs = " (the reference's victim too)" if repr(key) == d.returned("theirs") else ""
    # "your hand" only where the value returned is the hand the call left
    what = (
        f"{value!r}, the key your hand rests on after the call"
        if value is not None and hand == value
        else repr(value)
    )
    return (
        f"yours removed {key!r}{theirs} from its {fields} but returned {what}: pop_victim "
        "returns the key it evicts, and the caller deletes the returned key from the cache, "
        "so the key removed and the key returned must be the same"
    )


def taken(d: Difference) -> str:
    """The verb for the key your pop_victim returned: "evicted" where the replay shows that key
    alone leaving the tracked fields, "returned" otherwise (a returned value is not proof)."""
    found = removal(d)
    return "evicted" if found is not None and found[1] == [found[0]] else "returned"
