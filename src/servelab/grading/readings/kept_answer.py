"""A reading of a call that answered from a dict of the learner's own, kept from an earlier call:
the entry under the call's argument holds exactly yours, and with that entry taken out (on a
copy of the state before the call) yours answers as the reference does. An answer kept across
calls goes stale once the state it was computed from changes; whatever the topic."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import VALUE, Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["kept_answer"]


def _keys(args: tuple[Any, ...]) -> list[Any]:
    """What a dict kept per call may be keyed by: the one argument (a list as a tuple), or
    all of them as a tuple."""
    if len(args) != 1:
        return [tuple(args)] if args else []
    (arg,) = args
    return [tuple(arg)] if isinstance(arg, list) else [arg]


def _answer_without(d: Difference, name: str, key: Any) -> tuple[bool, Any]:
    """Your call again on a copy of the state before it, with ``name[key]`` taken out."""
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            del getattr(obj, name)[key]
            return True, getattr(obj, d.method)(*d.args)
    except (Exception, OutOfLines):
        return False, None


def kept_answer(d: Difference) -> str | None:
    """Yours returned the value a dict of its own kept under the call's argument, where the
    reference returns another, the state otherwise alike; said only where that entry taken out
    of a copy makes yours answer as the reference does."""
    if d.hidden or d.outcome_pair != VALUE or d.differ:
        return None
    mine, theirs = d.returned("mine"), d.returned("theirs")
    try:
        kept = [
            (name, value, key)
            for name, value in sorted(vars(d.subject).items())
            if isinstance(value, dict)
            for key in _keys(d.args)
            if key in value and repr(value[key]) == mine
        ]
    except Exception:  # an unhashable argument, an object without __dict__
        return None
    if len(kept) != 1:
        return None
    name, _, key = kept[0]
    ran, again = _answer_without(d, name, key)
    if not ran or repr(again) != theirs:
        return None
    return (
        f"yours answered {mine} from `{name}`, kept under {key!r} since an earlier call: with "
        f"that entry taken out, on a copy, yours answers "
        f"{theirs}, as the reference does; an answer kept across calls goes stale once what it "
        "was worked out from changes"
    )
