"""A report's "reproduce:" program pasted into the notebook, as printed: does it fail there?

Pasted after the grade cell, the program runs in the notebook's namespace with the learner's
class under its own name. It shows the failure when a line raises (or never returns), or
when its last line is an expression whose value differs from the reference's on the same
lines: the value the notebook shows under the cell. A program that runs to its end and ends
in the same value as the reference's shows nothing wrong.
"""

from __future__ import annotations

from typing import Any

from servelab.grading._script import graded_names
from servelab.grading.diagnose import SPECS
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget, plain


class _Stopped(Exception):
    """A pasted line raised or never returned."""


def _pasted(program: str, ns: dict[str, Any]) -> Any:
    """The value the notebook shows under the cell (the last line's, None for a statement)."""
    value = None
    for line in program.splitlines():
        try:
            with line_budget(LINES_PER_CALL):  # counted, not timed: a hang is run twice here
                try:
                    code = compile(line, "<pasted>", "eval")
                except SyntaxError:
                    exec(compile(line, "<pasted>", "exec"), ns)
                    value = None
                    continue
                value = eval(code, ns)
        except NameError:
            raise  # a name the notebook does not hold: the program cannot be pasted
        except (Exception, OutOfLines) as exc:
            raise _Stopped from exc
    return value


def fails_as_printed(topic: str, program: str, impl: Any, reference: Any) -> bool:
    """Whether ``program``, pasted as printed with ``impl`` under the learner's names, fails:
    a line raises, or the last value differs from ``reference``'s under the same names."""
    spec = SPECS[topic]
    names = graded_names(spec, impl)

    def namespace(classes: Any) -> dict[str, Any]:
        return {names.get(k, k): v for k, v in spec.namespace(classes).items()}

    try:
        mine = _pasted(program, namespace(impl))
    except _Stopped:
        return True
    try:
        theirs = _pasted(program, namespace(reference))
    except _Stopped:
        return True  # the reference raises where yours ran on: the last line shows that
    if _payloads(mine) and _payloads(theirs):
        return bool(mine != theirs)  # chunk payloads, which plain shows by their type alone
    return plain(mine) != plain(theirs)


def _payloads(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, bytes) for v in value)
