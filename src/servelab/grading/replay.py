"""Replaying a program line by line, writing down what a learner could see after each line.

Diagnosis replays a failing program (the paste-able lines of a report) on the learner's class,
on the checkpoint, on every known mistake and on hybrids of the learner's class: each replay is
a list of observations, one per line (the value returned or the kind of error raised, then the
topic's observable state), and two implementations behave alike on a program when their lists
are equal.
"""

from __future__ import annotations

import functools
import io
import re
import sys
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from typing import Any

from servelab.grading.observe import Canon, Unreadable
from servelab.testing.core import ImplementationHung, hang_guard

__all__ = [
    "LINES_PER_CALL",
    "Observation",
    "OutOfLines",
    "TopicReplay",
    "line_budget",
    "plain",
    "program",
    "program_of",
    "remember_program",
    "replay",
]

Observation = tuple[Hashable, ...]
"""What one line of the program showed: (value or error, observable state)."""

LINE_TIMEOUT_S = 0.5
#: Lines of Python one line of a program may execute in a replay, and one whole replay: a
#: call that never returns ends here, after the same work on every machine.
LINES_PER_CALL = 100_000
LINES_PER_REPLAY = 400_000


class OutOfLines(BaseException):
    """A replay ran past its budget of lines (not an Exception: learners catch those)."""


class Lines:
    """Lines executed under :func:`line_budget`: also a clock, the same on every run."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    @property
    def spent(self) -> int:
        return self.limit - self.left


ACTIVE_BUDGETS: list[Lines] = []
_PREVIOUS_TRACE: list[Any] = []


def _tracer(frame: Any, event: str, arg: Any) -> Any:
    if event == "line":
        out = False
        for budget in ACTIVE_BUDGETS:
            budget.left -= 1
            out = out or budget.left < 0
        if out:
            raise OutOfLines
    return _tracer


@contextmanager
def line_budget(lines: int = LINES_PER_REPLAY) -> Iterator[Lines]:
    """Raise :class:`OutOfLines` once the body has executed ``lines`` lines of Python.

    Budgets nest: every line counts against each open one. Once spent, every further line
    raises again, so a loop that catches the exception still ends. The trace function in
    place before the outermost budget is put back after it.
    """
    budget = Lines(lines)
    if not ACTIVE_BUDGETS:
        _PREVIOUS_TRACE.append(sys.gettrace())
        sys.settrace(_tracer)
    ACTIVE_BUDGETS.append(budget)
    try:
        yield budget
    finally:
        ACTIVE_BUDGETS.remove(budget)
        if not ACTIVE_BUDGETS:
            sys.settrace(_PREVIOUS_TRACE.pop())


PROGRAM_ATTRIBUTE = "repro"


def remember_program(exc: BaseException, lines: list[str]) -> None:
    """Attach the lines run so far to a learner's exception (the first program wins)."""
    if not hasattr(exc, PROGRAM_ATTRIBUTE):
        try:
            setattr(exc, PROGRAM_ATTRIBUTE, "\n".join(lines))
        except AttributeError:  # pragma: no cover - an exception type without a __dict__
            pass


def program_of(exc: BaseException) -> str:
    """The program attached by :func:`remember_program`, or an empty string."""
    program = getattr(exc, PROGRAM_ATTRIBUTE, "")
    return program if isinstance(program, str) else ""


_SUPPRESS = re.compile(r"^with suppress\([^)]*\):\s*")
#: ``compile``, remembered: diagnosis replays the same lines on many implementations and
#: variants, and compiling each again cost more than running it. A C-level cache, so the
#: line budget counts no lines of it.
_compile = functools.lru_cache(maxsize=4096)(compile)


@dataclass(frozen=True)
class TopicReplay:
    """How one topic's programs are replayed: the names they use and what a learner sees.

    ``subject`` is the name the programs give the graded object (``cache``, ``bm``);
    ``fields`` reads every observable field of it (:mod:`servelab.grading.observe`)."""

    noun: str
    namespace: Callable[[Any], dict[str, Any]]
    observe: Callable[[dict[str, Any], Canon], Hashable]
    value: Callable[[Any, Canon], Hashable]
    error_kinds: tuple[str, ...] = ()
    separating: tuple[str, ...] = ()
    """Fixed programs that tell alike mistakes apart, replayed when several match."""
    error_detail: Callable[[BaseException], Hashable] = lambda exc: None
    ungraded: tuple[str, ...] = ()
    """Methods whose return value no rule checks: a replay ignores it."""
    subject: str = ""
    classes: tuple[str, ...] = ()
    """The names the programs give the graded classes (``WeightCache``; ``LFU`` and ``SIEVE``):
    a report writes the learner's own names in their place (:mod:`servelab.grading._script`)."""
    fields: Callable[..., dict[str, Any]] | None = None
    detail: Callable[[Any], dict[str, Any]] | None = None
    """The graded object's own fields that no call shows at once (an LFU's counts), compared
    after each call localisation spies on (:class:`~servelab.grading.localise.Skeleton`)."""
    hidden_fields: Callable[[Any], dict[str, Any]] | None = None
    """More of the graded object's own fields (a SIEVE's queue), read only where one method's
    graft fixes the program yet no call of it differs in :attr:`fields` and :attr:`detail`:
    a second localisation with these finds the call, for a reading only. None: no second one."""
    hidden_reader: Callable[[str, Any, Any, str], str | None] | None = None
    """Reads such a program on the learner's own class where no call of the one method found
    differs even with :attr:`hidden_fields`: ``(program, impl, reference, method)``."""
    reader: Callable[[Any], str | None] | None = None
    """Reads the first diverging call as the rule it breaks (:mod:`servelab.grading.readings`);
    None: the report points at the place only."""
    slip_reader: Callable[[Any], str | None] | None = None
    """Reads a first diverging call where the program ended in the learner's own Python error
    (an IndexError): only readings written for such an error, each proven on copies, where
    :attr:`reader` stays silent. None: that error's place and the difference alone."""
    subject_per_program: bool = False
    """The programs build different objects (kv-offload: ``tier``, ``disk`` or ``h``): a report
    names the object the program's first line builds, not :attr:`subject`."""
    configured: Callable[[Any], Any] | None = None
    """``impl`` with every value its programs take from outside their text (a class's model,
    links or chunk size) changed to pairwise-distinct ones: two slips that differ only in
    such a value give the same numbers in the usual configuration, so a claim of certainty
    also replays this one. None: the programs spell their whole configuration."""


def program(*lines: str) -> str:
    """The lines of a program as one text, as a report shows it under "reproduce:"."""
    return "\n".join(lines)


def _error(exc: BaseException, kinds: tuple[str, ...]) -> str:
    """An error as a learner's own class and a catalogue class would both be described."""
    for kind in kinds:
        if any(cls.__name__ == kind for cls in type(exc).__mro__):
            return kind
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return type(exc).__name__  # pragma: no cover - every exception derives from a builtin


#: Above 0 while the replay reads the state between lines: those reads are the grader's, not
#: calls of the program (:mod:`servelab.grading.localise` does not compare them).
OBSERVING = [0]


def _safe(fn: Callable[[], Hashable]) -> Hashable:
    OBSERVING[0] += 1
    try:
        return fn()
    except Exception as exc:
        return Unreadable(exc)
    finally:
        OBSERVING[0] -= 1


def plain(value: Any, canon: Canon | None = None) -> Hashable:
    """A hashable, implementation-neutral form of a returned value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return tuple(sorted((repr(k), plain(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(plain(v) for v in value)
    return repr(type(value).__name__)


@contextmanager
def _quiet() -> Iterator[None]:
    with redirect_stdout(io.StringIO()):
        yield


_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)\s*=[^=]")
_DATA = (list, tuple, dict, int, float, str, bool)


def _assigned(line: str, ns: dict[str, Any], spec: TopicReplay, canon: Canon) -> Hashable:
    """The value a line such as ``chain = bm._chain([1, 2])`` stored, when it is plain data:
    what a later line would read (an object, such as the graded one, is observed otherwise)."""
    match = _ASSIGNMENT.match(line)
    value = ns.get(match.group(1)) if match else None
    return spec.value(value, canon) if isinstance(value, _DATA) else None


def _ungraded(line: str, spec: TopicReplay) -> bool:
    call = line.split("(", 1)[0].rpartition(".")[2]
    return call in spec.ungraded


def replay(program: str, spec: TopicReplay, impl: Any) -> list[Observation]:
    """Run ``program`` line by line with ``impl`` bound to its class names; observe each line."""
    try:
        ns = spec.namespace(impl)
    except Exception as exc:
        return [("namespace", type(exc).__name__)]
    canon = Canon()
    seen: list[Observation] = []
    for raw in program.splitlines():
        line = _SUPPRESS.sub("", raw.strip())
        if not line or line.startswith(("#", "from ", "import ")):
            continue
        result: Hashable
        try:
            with _quiet(), hang_guard(line, LINE_TIMEOUT_S), line_budget(LINES_PER_CALL) as spent:
                try:
                    code = _compile(line, "<replay>", "eval")
                except SyntaxError:
                    exec(_compile(line, "<replay>", "exec"), ns)
                    result = _assigned(line, ns, spec, canon)
                else:
                    value = eval(code, ns)
                    result = None if _ungraded(line, spec) else spec.value(value, canon)
        except ImplementationHung:
            seen.append(("hung",))
            break
        except OutOfLines:
            if spent.left >= 0:
                raise  # an enclosing budget ran out, not this line's
            seen.append(("hung",))
            break
        except Exception as exc:
            result = ("raised", _error(exc, spec.error_kinds), spec.error_detail(exc))
        seen.append((result, _safe(lambda: spec.observe(ns, canon))))
    return seen
