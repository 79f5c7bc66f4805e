"""The report's lines for a localisation: where the difference starts, the call that shows
it, the state it was called on, what yours and the reference's did there, and, where it is
known for certain, the line of yours that made the difference (:mod:`.faulty_line`).

Apart from :mod:`servelab.grading.localise`, which finds the place: this words it, and asks
:mod:`.faulty_line` for the line of yours.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import linecache
import os
import re
from collections.abc import Mapping
from typing import Any

from servelab.grading.faulty_line import Observe, faulty_line
from servelab.grading.localise import Divergence, Localisation
from servelab.grading.observe import Unreadable, changes, shown
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["place_hint", "where_lines"]


def place_hint(place: Localisation) -> str | None:
    """With a method found and no known mistake earned, the hint points there and names no
    cause: a check's own hint describes the mistake it was written for, maybe not this one."""
    d = place.divergence
    if d is None:
        return None
    their_before = d.before if d.their_before is None else d.their_before
    unchanged = d.mine[1] == d.before and d.theirs[1] == their_before
    argument = _argument_changed(d) if d.mine == d.theirs else None
    if argument is not None:
        what = argument
    elif _raised_on_yours(d):
        what = (
            f"{_reference(d)}{_present(d.theirs[0])} where yours {d.mine[0]}: compare what "
            "your methods keep with what the reference's keep"
        )
    elif d.theirs[0].startswith("raised") and not d.mine[0].startswith("raised"):
        what = f"the reference {_present(d.theirs[0])} where yours {d.mine[0]}"
    elif d.mine[1] == d.theirs[1] or unchanged:
        what = "its result differs from the reference's"
    else:
        what = "it changes the state differently from the reference's"
    return f"start at your `{d.method}`: on the call under where:, {what}"


_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the package's
_RAISE = re.compile(r"\s*raise\b")  # a raise statement, not a name such as ``raised``


def _raised_on_yours(d: Divergence) -> bool:
    """The reference's side of a call always runs on a copy of the learner's state: where it
    raises and the learner's does not, and the error did not come from a ``raise`` statement
    of the reference's own (a check the learner's method may lack), the raise is the
    reference's method meeting that state (a heap out of order), not a rule it enforces."""
    if not d.theirs[0].startswith("raised") or d.mine[0].startswith("raised"):
        return False
    tb = None if d.their_error is None else d.their_error.__traceback__
    if tb is None:
        return False  # where it came from is not known
    while tb.tb_next is not None:
        tb = tb.tb_next
    name = os.path.abspath(tb.tb_frame.f_code.co_filename)
    stated = _RAISE.match(linecache.getline(name, tb.tb_lineno)) is not None
    return not (stated and name.startswith(_OWN))


def _reference(d: Divergence) -> str:
    """Who the report says acted on the reference's side of the call: its method run on a copy
    of the learner's state, where that state is what made it raise; else the reference."""
    if _raised_on_yours(d):
        return f"the reference's `{d.method}`, run on a copy of your state, "
    return "the reference "


def _argument_changed(d: Divergence) -> str | None:
    """Where the outcome and every field agree, the call differs in what it left in an
    argument it was given (a list it emptied): said as that, when running yours and the
    reference's again on copies shows it; None otherwise."""
    if d.subject is None or d.reference_class is None:
        return None
    try:
        with line_budget(LINES_PER_CALL):
            mine_obj, their_obj = copy.deepcopy(d.subject), copy.deepcopy(d.subject)
            their_obj.__class__ = d.reference_class
            name = d.method.rpartition(".")[2]
            mine_args, their_args = copy.deepcopy(d.args), copy.deepcopy(d.args)
            getattr(mine_obj, name)(*mine_args, **copy.deepcopy(d.kwargs))
            getattr(their_obj, name)(*their_args, **copy.deepcopy(d.kwargs))
    except (Exception, OutOfLines):
        return None
    try:
        names = list(inspect.signature(getattr(d.reference_class, name)).parameters)[1:]
    except (TypeError, ValueError, AttributeError):
        names = []
    for i, (given, mine, theirs) in enumerate(zip(d.args, mine_args, their_args, strict=True)):
        if isinstance(given, list | dict | set) and mine != theirs and theirs == given:
            called = f"`{names[i]}`" if i < len(names) else f"argument {i + 1}"
            return (
                f"yours changed {called}, the {type(given).__name__} it was given: "
                f"{given!r} -> {mine!r}; the reference leaves it as it was (the caller "
                "still reads it after the call)"
            )
    return None


def _present(outcome: str) -> str:
    """ "returned 'a'" as "returns 'a'": the reference's outcome is a rule, not an event."""
    for past, now in (("returned", "returns"), ("raised", "raises")):
        if outcome.startswith(past):
            return now + outcome[len(past) :]
    return outcome


def _worth_showing(before: Mapping[str, Any]) -> dict[str, Any]:
    """The state before a call, less a step output's lists that are still empty."""
    return {k: v for k, v in before.items() if v or not k.startswith("out.")}


def _without(fields: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in keys}


def where_lines(place: Localisation, fields: Observe | None = None) -> tuple[str, ...]:
    """The report's lines for a localisation: the first after "where:", the rest under it;
    with the topic's ``fields``, the line of the learner's method that made the difference
    (:mod:`servelab.grading.faulty_line`), where it is known for certain."""
    if place.note:
        return (place.note,)
    if not place.methods:
        return ()
    names = " and ".join(f"`{m}`" for m in place.methods)
    d = place.divergence
    if d is None:
        return (
            f"the difference is in your {names}: with the reference's in its place, this "
            "program behaves as expected",
        )
    unread = {
        k
        for k, v in d.before.items()
        if isinstance(v, Unreadable) and d.mine[1].get(k) == v == d.theirs[1].get(k)
    }  # a field this step cannot read yet (a method still to write) says nothing
    d = dataclasses.replace(
        d,
        before=_without(d.before, unread),
        mine=(d.mine[0], _without(d.mine[1], unread)),
        theirs=(d.theirs[0], _without(d.theirs[1], unread)),
        their_before=None if d.their_before is None else _without(d.their_before, unread),
    )
    also = [m for m in place.methods if m != d.method]
    head = f"the difference starts in your `{d.method}`"
    if also:
        head += " (and needs " + " and ".join(f"`{m}`" for m in also) + " too)"
    line = faulty_line(place.divergence, fields)
    return (
        head,
        f"called as {d.call}, on: {shown(_worth_showing(d.before))}",
        f"yours {d.mine[0]}; {changes(d.before, d.mine[1])}",
        f"{_reference(d)}{_present(d.theirs[0])}; "
        f"{changes(d.before if d.their_before is None else d.their_before, d.theirs[1])}",
        *([line] if line is not None else []),
    )
