"""Text of the learner's objects, computed within a fixed number of steps.

A report shows the learner's exceptions (``str(exc)``), and a check may show a value the
learner's code returned (``repr(value)``). Both run the learner's code: a ``__str__`` that
recurses, raises or loops forever must still give a report, and the same report on every run.
So the text is computed under a tracer that counts executed bytecodes and gives up after
:data:`STEPS` of them: a count, not seconds, so a busy machine gives the same answer. A loop that
also swallows the tracer's exception is stopped by the hang guard. A loop inside one C call
cannot be stopped in-process (the CLI's child-process timeout covers that).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from servelab.testing.core import ImplementationHung, hang_guard

__all__ = ["STEPS", "bounded_repr", "bounded_str", "bounded_text"]

#: Bytecodes the learner's ``__str__`` or ``__repr__`` may execute (a few milliseconds).
STEPS = 200_000
#: CPU seconds after which a loop that swallowed the step limit is stopped all the same.
BACKSTOP_S = 1.0


class _OutOfSteps(BaseException):
    """Internal: the step budget is spent (a BaseException, so ``except Exception`` lets it by)."""


def bounded_text(make: Callable[[], object], what: str) -> tuple[bool, str]:
    """``(True, make())`` if that is a str within :data:`STEPS` bytecodes, else ``(False, note)``.

    The note names what was asked for (``what``, such as ``"str()"``) and why there is no text:
    ``"str() raised RecursionError"``, ``"str() did not finish"``. Never raises: even a
    KeyboardInterrupt becomes a note (a grade tells a real Ctrl-C by its own signal handler).
    """
    spent = 0

    def count(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal spent
        frame.f_trace_opcodes = True
        spent += 1
        if spent > STEPS:
            raise _OutOfSteps
        return count

    previous = sys.gettrace()
    try:
        with hang_guard(what, BACKSTOP_S):
            sys.settrace(count)
            try:
                text = make()
            finally:
                sys.settrace(previous)
    except (_OutOfSteps, ImplementationHung):
        return False, f"{what} did not finish"
    except BaseException as exc:  # any failure of the learner's code becomes a note
        return False, f"{what} raised {type(exc).__name__}"
    if type(text) is not str:  # a str subclass could run the learner's code again
        return False, f"{what} returned a {type(text).__name__}, not a str"
    return True, text


def bounded_str(obj: object) -> tuple[bool, str]:
    """``str(obj)`` within the step budget (see :func:`bounded_text`)."""
    return bounded_text(lambda: str(obj), "str()")


def bounded_repr(obj: object) -> tuple[bool, str]:
    """``repr(obj)`` within the step budget (see :func:`bounded_text`)."""
    return bounded_text(lambda: repr(obj), "repr()")
