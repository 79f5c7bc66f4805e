"""What the grader says about the learner's own code: where it broke, and what that usually means.

A grade report speaks of the learner's methods, never of the grader's. The helpers here find, in a
traceback, the learner's frame (not servelab, not Hypothesis, not the standard library) and the
program the grader was running when the exception happened, and they hold the hints for the
exceptions that learners' code raises most often.
"""

from __future__ import annotations

import ast
import linecache
import sys
import traceback
import types
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from servelab.testing.core import ImplementationHung, is_library_code

__all__ = [
    "EXCEPTION_HINTS",
    "exception_hint",
    "exception_meaning",
    "learner_frame",
    "looping_frame",
    "program_in_progress",
    "stacking_problem",
    "tb_frames",
    "traceback_of",
    "unreached",
]

_SERVELAB = str(Path(__file__).resolve().parent.parent)  # the servelab package

_HYPOTHESIS_HINT = (
    "Hypothesis's own exceptions (reject(), assume(), StopTest, ...) belong in tests, not in the "
    "code under test, and the grader counts one as a failure; raise an exception that says what "
    "went wrong instead"
)
EXCEPTION_HINTS: Mapping[str, str] = {
    "StopIteration": (
        "next() found nothing left: your code asked for one more item than there was (a victim "
        "when nothing can be evicted?). A loop that repeats until something fits must stop as "
        "soon as it fits and get closer on every pass: check its fit test (> or >=) and that "
        "each removal gives its size back"
    ),
    "KeyError": (
        "a lookup of a key that is not there: it was never added, or was already removed from "
        "one structure but not from another; update every structure in the same place"
    ),
    "AttributeError": (
        "an attribute that does not exist: a typo, or a name the skeleton spells differently "
        "(compare with the skeleton's __init__)"
    ),
    "IndexError": (
        "an index past the end of a list, or a pop from an empty one: check the empty case"
    ),
    "TypeError": (
        "a call with the wrong arguments, or an operation on a value of the wrong type (often "
        "None returned by a method that forgot to return)"
    ),
    "RecursionError": (
        "a method that calls itself without end: call the previous step's version with "
        "super().method(...), not self.method(...)"
    ),
    "ExecuteError": (
        "what execute returned or passed to a helper is not what this step needed: the "
        "message says what it got and what the step asked for"
    ),
    "ZeroDivisionError": "a division by zero: check the empty case first",
    "UnboundLocalError": "a local variable used before it is assigned on every path",
    "NameError": "a name that is not defined in your cell: a typo, or a missing import",
    "SystemExit": (
        "sys.exit() or raise SystemExit inside a method ends the whole program; raise an "
        "exception that says what went wrong instead"
    ),
    "KeyboardInterrupt": (
        "raise KeyboardInterrupt inside a method looks like Ctrl-C to the caller; raise an "
        "exception that says what went wrong instead"
    ),
    "UnsatisfiedAssumption": _HYPOTHESIS_HINT,
    "StopTest": _HYPOTHESIS_HINT,
    "HypothesisException": _HYPOTHESIS_HINT,
}
BASE_EXCEPTION_HINT = (
    "an exception class derived from BaseException, not Exception, slips past every `except "
    "Exception`; derive it from Exception (or from ValueError, KeyError, ...)"
)


def exception_hint(exc: BaseException) -> str | None:
    """The hint for an exception raised by the learner's code, by its type (and its bases)."""
    for kind in type(exc).__mro__:
        if kind.__name__ in EXCEPTION_HINTS:
            return EXCEPTION_HINTS[kind.__name__]
    if not isinstance(exc, Exception):
        return BASE_EXCEPTION_HINT
    return None


def exception_meaning(exc: BaseException) -> str | None:
    """What an exception of this type means, without its usual cause: the part of its hint
    before the first colon ("an index past the end of a list, or a pop from an empty one"),
    which is true of every such error; the rest guesses why, and may be about another slip."""
    hint = exception_hint(exc)
    if hint is None or not isinstance(exc, Exception):
        return None
    return hint.split(": ", 1)[0]


def learner_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the traceback that belongs to the learner's code, if any."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not is_library_code(frame.filename):
            return frame
    return None


def looping_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """Where a hung call of the learner's loops, the same on every run: the header of the loop
    that was running, not the line the timer happened to interrupt.

    The innermost learner frame inside a ``while`` wins (a ``while`` is what spins without
    end); else the innermost inside a ``for``; else the innermost learner frame. A frame whose
    source cannot be read and parsed keeps its interrupted line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not is_library_code(f.filename)]
    for kind in (ast.While, (ast.For, ast.AsyncFor)):
        for frame in reversed(frames):
            header = _loop_header(frame, kind)
            if header is not None:
                return header
    return frames[-1] if frames else None


def _loop_header(
    frame: traceback.FrameSummary, kind: type[ast.AST] | tuple[type[ast.AST], ...]
) -> traceback.FrameSummary | None:
    """The innermost loop of ``kind`` around the frame's line, as a frame at its header."""
    lineno = frame.lineno
    source = "".join(linecache.getlines(frame.filename))
    if not source or lineno is None:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    loops = [n for n in ast.walk(tree) if isinstance(n, kind) and isinstance(n, ast.stmt)]
    around = [n.lineno for n in loops if n.lineno <= lineno <= (n.end_lineno or 0)]
    if not around:
        return None
    line = max(around)  # the innermost
    text = linecache.getline(frame.filename, line).strip()
    return traceback.FrameSummary(frame.filename, line, frame.name, line=text)


def tb_frames(tb: TracebackType | None) -> list[types.FrameType]:
    """The frames of a traceback, the outermost first: a walk that keeps the last match it
    finds keeps the innermost."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def program_in_progress(tb: TracebackType | None) -> list[str] | None:
    """The paste-able program a grader script was running when ``tb`` was raised.

    Every topic's probes and state machines write each call down before making it (a
    ``Script.lines`` or ``RecordingMachine.log`` list of code lines), so the innermost grader
    frame whose ``self`` holds such a list knows the whole program, the last line being the
    operation in progress.
    """
    found: list[str] | None = None
    for frame in tb_frames(tb):
        if frame.f_code.co_filename.startswith(_SERVELAB):
            owner = frame.f_locals.get("self")
            for name in ("lines", "log"):
                lines = getattr(owner, name, None)
                if isinstance(lines, list) and lines and all(isinstance(x, str) for x in lines):
                    found = list(lines)
                    break
    return found


def traceback_of(exc: BaseException) -> TracebackType | None:
    """The traceback that reached into the program: a hang raised from a swallowed one has it
    on its cause."""
    if isinstance(exc, ImplementationHung) and exc.__cause__ is not None:
        return exc.__cause__.__traceback__ or exc.__traceback__
    return exc.__traceback__


def _entered(exc: BaseException) -> tuple[Any, Any] | None:
    """The object and the code of the call a probe's line made when ``exc`` was raised: the
    frame its own code (``<probe>``) entered last."""
    tb, found = traceback_of(exc), None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<probe>" and tb.tb_next is not None:
            frame = tb.tb_next.tb_frame
            found = (frame.f_locals.get("self"), frame.f_code)
        tb = tb.tb_next
    return found


def _reaches(obj: Any, code: Any, methods: set[str], budget: int = 200) -> bool:
    """Whether ``code`` may call one of ``methods`` of ``obj``, through the methods of its
    class it names (every definition along the MRO, for a ``super()``): what a line's call
    can reach is no setup of the check about those methods."""
    seen: set[str] = set()
    todo = [code]
    while todo and budget:
        budget -= 1
        names = set(todo.pop().co_names)
        if names & methods:
            return True
        for name in names - seen:
            seen.add(name)
            for cls in type(obj).__mro__:
                fn = vars(cls).get(name)
                fn = getattr(fn, "fget", fn)  # a property's getter
                if isinstance(fn, types.FunctionType):
                    todo.append(fn.__code__)
    return bool(todo)  # out of budget: it may


def unreached(label: str, about: tuple[str, ...], exc: BaseException, line: str | None) -> str:
    """A probe's title, or, where a line of its own setup raised (a call that cannot reach
    a method its hint is about, ``about``), the title with that said: the check under the
    title never ran, and the error is no evidence of the rule it names."""
    entered = _entered(exc)
    methods = {m.rpartition(".")[2] for m in about}
    if not methods or entered is None or not line or entered[1].co_name in methods:
        return label
    if entered[0] is None or _reaches(entered[0], entered[1], methods):
        return label
    return f"{label}: not reached, its setup line `{line}` raised first"


def _classes(impl: Any) -> list[type]:
    values = impl.values() if isinstance(impl, Mapping) else [impl]
    return [value for value in values if isinstance(value, type)]


def _key(klass: type) -> tuple[str, str]:
    return (klass.__module__, klass.__qualname__)


def _body(klass: type) -> tuple[tuple[str, str, int, bytes], ...]:
    """What a class statement compiled to: equal for two runs of one cell, empty without methods."""
    codes = []
    for name, value in vars(klass).items():
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        if code is not None:
            codes.append((name, code.co_filename, code.co_firstlineno, code.co_code))
    return tuple(sorted(codes))


def _own_parent(cls: type, klass: type) -> tuple[str, str]:
    """(what, hint) for a class built on an earlier class of its own name, ``klass``."""
    chain = " → ".join(k.__name__ for k in cls.__mro__ if k is not object)
    copies = [cls]
    while True:
        same = [base for base in copies[-1].__bases__ if _key(base) == _key(cls)]
        if not same:
            break
        copies.append(same[0])
    if len(copies) == 1:  # the copy is further up: a parent that extends an older `cls`
        return (
            f"`{cls.__name__}` is built on an earlier definition of `{klass.__name__}` ({chain})",
            "each step's class extends the previous step's class, never a later one or itself: "
            "fix the parent in the class lines and run those cells again",
        )
    parents = [base.__name__ for base in copies[-1].__bases__ if base is not object]
    name = cls.__name__
    # Every copy above the first definition came from a `class X(X)` cell; equal bodies mean
    # one such cell ran again.
    bodies = [_body(copy) for copy in copies[:-1]]
    runs = len(bodies) if bodies[0] and all(body == bodies[0] for body in bodies) else 1
    ran = f", and that cell ran {runs} times" if runs > 1 else ""
    what = (
        f"`{name}` names its own class as its parent (`class {name}({name})`){ran}: it "
        f"extends the `{name}` defined before it ({chain})"
    )
    if len(parents) == 1:
        return what, (
            f"each step's class extends the previous step's: write `class {name}({parents[0]}):` "
            "and run that cell again"
        )
    return what, (
        f"each step's class extends the previous step's: name that class as the parent of "
        f"`{name}`, not `{name}` itself, and run that cell again"
    )


def stacking_problem(impl: Any) -> tuple[str, str] | None:
    """A class graded on top of a stale copy of itself or of a parent: (what, hint) or None.

    Two ways a notebook's classes go stale, neither a mistake in the methods:

    * the same class twice in the MRO: a cell says ``class X(X)`` (run once or more), where the
      previous step's class belongs; the report names that class (the earlier ``X``'s parent);
    * a parent that a cell has since redefined (``SizedCache`` ran again after
      ``EvictingCache(SizedCache)``): the graded class still extends the old one. Only
      classes of ``__main__`` (notebook cells) are checked, where re-running happens.
    """
    for cls in _classes(impl):
        seen: dict[tuple[str, str], type] = {}
        for klass in cls.__mro__:
            key = _key(klass)
            if key in seen:
                return _own_parent(cls, klass)
            seen[key] = klass
        main = sys.modules.get("__main__")
        for klass in cls.__mro__[1:]:
            if klass.__module__ != "__main__" or klass.__qualname__ != klass.__name__:
                continue
            current = getattr(main, klass.__name__, klass)
            if isinstance(current, type) and current is not klass:
                return (
                    f"`{cls.__name__}` extends an older `{klass.__name__}`: the cell that "
                    f"defines `{klass.__name__}` ran again after the one that defines "
                    f"`{cls.__name__}`",
                    f"run the cells from `{klass.__name__}` down to this grade cell again, or "
                    "restart the kernel and run all cells",
                )
    return None
