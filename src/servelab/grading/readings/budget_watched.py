"""A ``schedule_running`` read on a copy with ``extend``, ``out.scheduled`` and
``out.preempted`` watched: the order of what it did says which rule broke, whatever the code.
A chunk listed before the ``extend`` that then raised (left listed, and listed again on the
retry), or a retry after preempting another request that starts the asker from another token
while the victim keeps its count: each said only as the watched copy shows it, and only where
that copy ends as your call did."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.testing.expected_error import error_matches

__all__ = ["watched_running"]

Event = tuple[Any, ...]


class _Logged(list):  # type: ignore[type-arg]
    """A list that logs each entry put in it, by the request it names."""

    def __init__(self, items: Any, log: list[Event], what: str) -> None:
        super().__init__(items)
        self.log, self.what = log, what

    def _note(self, items: Any) -> None:
        for item in items:
            self.log.append((self.what, _id(item)))

    def append(self, item: Any) -> None:
        self._note([item])
        super().append(item)

    def extend(self, items: Any) -> None:
        items = list(items)
        self._note(items)
        super().extend(items)

    def insert(self, i: Any, item: Any) -> None:
        self._note([item])
        super().insert(i, item)

    def __iadd__(self, items: Any) -> Any:  # type: ignore[misc]
        self.extend(items)
        return self


def _id(item: Any) -> Any:
    seq = getattr(item, "seq", item)
    return getattr(seq, "seq_id", None)


def _watched(d: Difference) -> tuple[list[Event], list[Any]] | None:
    """What yours did in this call, run again on a copy: ("extend", id, start, ok, computed)
    for each extend (ok: True; False where it raised OutOfBlocks; None for another error),
    ("listed", id) and ("preempted", id) for each entry put in the output; with the requests
    out.scheduled names when the call ends. None where it cannot run or ends otherwise than
    your call did."""
    log: list[Event] = []
    try:
        obj, args = copy.deepcopy((d.subject, d.args))
        out = args[0]
        own: Callable[..., Any] = obj.extend

        def extend(seq: Any, start: Any, n: Any) -> Any:
            computed = dict(obj.computed)
            try:
                slots = own(seq, start, n)
            except Exception as e:
                failed = False if error_matches(e, "OutOfBlocks") else None
                log.append(("extend", _id(seq), start, failed, computed))
                raise
            log.append(("extend", _id(seq), start, True, computed))
            return slots

        obj.extend = extend
        out.scheduled = _Logged(out.scheduled, log, "listed")
        out.preempted = _Logged(out.preempted, log, "preempted")
        with line_budget(LINES_PER_CALL):
            obj.schedule_running(*args)
        listed = [_id(c) for c in out.scheduled]
    except (Exception, OutOfLines):
        return None
    shown = d.mine.get("out.scheduled")
    if not isinstance(shown, list) or [*map(str, listed)] != [*map(str, shown)]:
        return None
    return log, listed


def _listed_early(log: list[Event], listed: list[Any]) -> str | None:
    """A chunk put in out.scheduled before the extend that raised OutOfBlocks, and still
    there when the call ends, more times than its extends returned slots (``listed``: the
    requests out.scheduled names at the end, so a chunk taken back out is not counted)."""
    for i, event in enumerate(log):
        if event[0] != "extend" or event[3] is not False:
            continue
        seq = event[1]
        before = [e for e in log[:i] if e[1] == seq and e[0] in ("listed", "extend")]
        if not before or before[-1][0] != "listed":
            continue
        kept = listed.count(seq)
        ok = sum(1 for e in log if e[0] == "extend" and e[1] == seq and e[3])
        if kept <= ok:
            continue
        again = f", and yours listed it again: {kept} times in all" if kept > 1 else ""
        return (
            f"yours put request {seq}'s chunk in out.scheduled before its extend, which then "
            f"raised OutOfBlocks; the chunk stayed listed{again} (seen on a copy with extend "
            "and out.scheduled watched). List a chunk only once extend has returned its "
            "slots: a failed extend leaves nothing behind"
        )
    return None


def _asker_reset(log: list[Event]) -> str | None:
    for i, event in enumerate(log):
        if event[0] != "extend" or event[3] is not False:
            continue
        seq, start = event[1], event[2]
        rest = log[i + 1 :]
        victims = []
        for e in rest:
            if e[0] == "preempted":
                victims.append(e[1])
            if e[0] == "extend" and e[1] == seq:
                victim = victims[0] if len(victims) == 1 else None
                computed = e[4]
                if victim is None or victim == seq or e[2] == start:
                    return None
                kept = computed.get(victim)
                if kept is None or kept == 0 or event[4].get(victim) != kept:
                    return None
                if computed.get(seq) != e[2]:
                    return None
                return (
                    f"yours set the computed tokens of request {seq}, whose extend failed, "
                    f"from {start} to {e[2]} and retried it from there, and left the victim, "
                    f"request {victim}, at {kept} (seen on a copy with extend watched): the "
                    "count reset is the asker's, not the victim's. Preempting resets "
                    "the victim's count to 0 (its blocks are freed, it recomputes from the "
                    "start); the request whose extend failed keeps its own and retries from it"
                )
        return None
    return None


def watched_running(d: Difference) -> str | None:
    """What a watched copy of your ``schedule_running`` shows: a chunk listed before the
    extend that raised, or a retry that restarts the asker while the victim keeps its count."""
    if d.method != "schedule_running" or d.i_raised or not d.args:
        return None
    if not {"out.scheduled", "num_computed_tokens"} & d.differ:
        return None
    watched = _watched(d)
    if watched is None:
        return None
    log, listed = watched
    if "out.scheduled" in d.differ:
        early = _listed_early(log, listed)
        if early:
            return early
    return _asker_reset(log) if "num_computed_tokens" in d.differ else None
