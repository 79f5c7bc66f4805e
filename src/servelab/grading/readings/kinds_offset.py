"""Whether two returned numbers one apart are an off by one of the method's own arithmetic.

One call's answers one apart say nothing of why: a count returned after a wrong choice, a
pin count that adds another count, a length read from a stale field all land one off by
chance. An off by one in the method's own arithmetic stays the same offset whatever the
inputs; a by-product moves with what caused it (a pin count that adds the transfers
agrees with the reference once the program takes no transfer). So the question "off by
one?" is asked only where the call changed the same fields as the reference (the number is
the method's own answer, not a trace of a change made wrong) and every other call tried
parts yours from the reference by the same offset, one of them at least: the same method
with other arguments on copies of the same state, the same call from the program with one
earlier line left out, and the same call from a second state (the program built with
another number).
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any

from servelab.grading.localise import Skeleton, state_before
from servelab.grading.replay import LINE_TIMEOUT_S, LINES_PER_CALL, OutOfLines, line_budget
from servelab.testing.core import ImplementationHung, hang_guard

__all__ = ["MAX_DROPPED", "MAX_OTHERS", "offset_holds", "other_results"]

MAX_OTHERS = 4
"""Other arguments tried at most: each is two calls on copies, within a failing grade's time."""
MAX_DROPPED = 5
"""Earlier lines left out at most (one at a time): each is one replay of a short program."""


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _others_like(value: Any, before: Any) -> list[Any]:
    """Other values for an argument: a count one or two higher (or one lower), or another
    key of the same type that the state holds (a list's entries, a mapping's keys)."""
    if _count(value):
        return [value + 1, value + 2, *([value - 1] if value > 0 else [])]
    if not isinstance(value, str | int | tuple):
        return []
    seen: list[Any] = []
    for field in (before or {}).values():
        entries = list(field) if isinstance(field, list | tuple | dict) else []
        for x in entries:
            if type(x) is type(value) and x != value and x not in seen:
                seen.append(x)
    return seen


def _call(obj: Any, name: str, args: tuple[Any, ...], call: str) -> tuple[bool, Any]:
    try:
        with (
            redirect_stdout(io.StringIO()),
            hang_guard(call, LINE_TIMEOUT_S),
            line_budget(LINES_PER_CALL),
        ):
            return True, getattr(obj, name)(*args)
    except Exception:
        return False, None
    except (OutOfLines, ImplementationHung):
        return False, None


def _both(divergence: Any, subject: Any, args: tuple[Any, ...]) -> tuple[Any, Any] | None:
    """Yours and the reference's answers to the method called with ``args`` on copies of
    ``subject``; None unless both returned."""
    try:
        mine, theirs = copy.deepcopy((subject, args)), copy.deepcopy((subject, args))
        theirs[0].__class__ = divergence.reference_class
    except Exception:
        return None
    name = divergence.method.rpartition(".")[2]
    ok_mine, a = _call(mine[0], name, mine[1], divergence.call)
    ok_theirs, b = _call(theirs[0], name, theirs[1], divergence.call)
    return (a, b) if ok_mine and ok_theirs else None


def _other_arguments(divergence: Any) -> list[tuple[Any, Any]]:
    """The same state, one argument changed at a time."""
    args, tried = tuple(divergence.args), 0
    found: list[tuple[Any, Any]] = []
    for i, value in enumerate(args):
        for other in _others_like(value, divergence.before):
            if tried >= MAX_OTHERS:
                return found
            tried += 1
            pair = _both(divergence, divergence.subject, (*args[:i], other, *args[i + 1 :]))
            if pair is not None:
                found.append(pair)
    return found


def _earlier_lines_left_out(skeleton: Skeleton, divergence: Any) -> list[tuple[Any, Any]]:
    """The same call (the method's call of the same rank) in the program with one earlier
    line left out, the line that builds the object kept."""
    lines = divergence.program.splitlines()
    found: list[tuple[Any, Any]] = []
    for j in range(1, min(len(lines) - 1, MAX_DROPPED + 1)):
        program = "\n".join(lines[:j] + lines[j + 1 :])
        try:
            with redirect_stdout(io.StringIO()), line_budget(2 * LINES_PER_CALL):
                state = state_before(skeleton, divergence, program)
        except (Exception, OutOfLines, ImplementationHung):
            continue
        if state is None or state[2]:
            continue
        pair = _both(divergence, state[0], tuple(state[1]))
        if pair is not None:
            found.append(pair)
    return found


def other_results(skeleton: Skeleton, divergence: Any) -> list[tuple[Any, Any]]:
    """The values yours and the reference return for other calls of the same method: other
    arguments on copies of the same state, and the same call in the program with one
    earlier line left out; only calls where both returned. Empty where no reference class
    or copy is at hand."""
    if divergence.subject is None or divergence.reference_class is None or divergence.kwargs:
        return []
    return _other_arguments(divergence) + _earlier_lines_left_out(skeleton, divergence)


def offset_holds(
    offset: int,
    differ: bool,
    others: Callable[[], list[tuple[Any, Any]]] | None,
    second: Callable[[], tuple[Any, Any, Any] | None] | None,
) -> bool:
    """Whether an offset of ``offset`` (yours less the reference's) is the method's own: the
    call's fields agree (``differ`` false), and every other call tried (``others``: other
    arguments and earlier lines left out; ``second``: a second state) answers numbers
    ``offset`` apart, one call at least: a call where they agree, or part otherwise, shows
    an offset that moves with the inputs."""
    if differ:
        return False
    pairs = list(others()) if others is not None else []
    again = second() if second is not None else None
    if again is not None:
        pairs.append((again[0], again[1]))
    numbers = [(a, b) for a, b in pairs if _count(a) and _count(b)]
    if len(numbers) < len(pairs) and any(a != b for a, b in pairs if (a, b) not in numbers):
        return False  # another call answers something other than a count, and differs
    return bool(numbers) and all(a - b == offset for a, b in numbers)
