"""Run a topic's state machine so that whatever the learner's code raises counts as a failure.

Hypothesis gives some exceptions a meaning of its own: ``reject()`` and ``assume(False)``
(``UnsatisfiedAssumption``) make a program invalid, ``StopTest`` ends it silently, a health
check or a ``SkipTest`` stops the whole run, and a ``BaseException`` escapes unshrunk. Raised
by the learner's code, each would turn a failing program into no program at all, and a grade
that ran none could still pass. So every exception that leaves a program through the learner's
code is handed to Hypothesis as one plain failure (:class:`_LearnerRaised`) and given back
unwrapped after shrinking. The wrapper's own message never calls the learner's ``__str__``,
which Hypothesis formats while it reports.

The programs that ran to their end are counted, so the report states what was run, not what
was asked for; and shrinking a failure is bounded by a number of programs, not by seconds.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from hypothesis import settings
from hypothesis.internal.conjecture import engine as _hypothesis_engine
from hypothesis.stateful import get_state_machine_test

from servelab.testing.core import (
    ImplementationHung,
    InvariantViolation,
    RecordingMachine,
    is_library_code,
)

__all__ = ["run_programs", "shrinking_bounded_by_count"]

_log = logging.getLogger(__name__)
_PATCHED = ("time", "MAX_SHRINKING_SECONDS")


class _LearnerRaised(Exception):
    """Internal: an exception from the learner's code, carried through Hypothesis as a failure."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"the implementation raised {type(original).__name__}")
        self.original = original


def _through_learner_code(tb: TracebackType | None) -> bool:
    while tb is not None:
        if not is_library_code(tb.tb_frame.f_code.co_filename):
            return True
        tb = tb.tb_next
    return False


def _learners(exc: BaseException) -> bool:
    """Raised by (or through) the learner's code, and not one the grader handles itself.

    A hang is reported as it is, unshrunk and at once; a KeyboardInterrupt may be a real
    Ctrl-C, which must stop everything.
    """
    if isinstance(exc, ImplementationHung | KeyboardInterrupt | InvariantViolation):
        return False
    return _through_learner_code(exc.__traceback__)


def _counting(test: Callable[..., None], counter: list[int]) -> Callable[..., None]:
    # ``wraps`` keeps the test's digest, from which a derandomized run draws its seed: the
    # programs generated are exactly those the unwrapped test would get.
    @functools.wraps(test)
    def program(*args: Any, **kwargs: Any) -> None:
        try:
            test(*args, **kwargs)
        except BaseException as exc:
            if not _learners(exc):
                raise
            wrapped = _LearnerRaised(exc)
        else:
            counter[0] += 1
            return
        raise wrapped  # outside the handler: no context chain back into the learner's code

    return program


def run_programs(
    machine: type[RecordingMachine], chosen: settings
) -> tuple[int, BaseException | None]:
    """Run ``machine`` under ``chosen``: (programs run to their end, the learner's exception).

    The exception is the one the smallest failing program raised, with its own traceback; other
    failures (an invariant, a hang, a Ctrl-C) propagate as Hypothesis raises them.
    """
    counter = [0]
    # ``inner_test`` is Hypothesis's documented hook for wrapping what a test runs.
    test: Any = get_state_machine_test(machine, settings=chosen)
    test.hypothesis.inner_test = _counting(test.hypothesis.inner_test, counter)
    try:
        test()
    except _LearnerRaised as failure:
        return counter[0], failure.original
    return counter[0], None


class _ProgramClock:
    """Stands in for ``time`` inside Hypothesis's engine: the "seconds" are programs run.

    Hypothesis ends shrinking when ``time.perf_counter()`` passes a deadline set
    ``MAX_SHRINKING_SECONDS`` after shrinking starts. With this clock the deadline is a number
    of programs, so how far a failure shrinks depends on the implementation only.
    """

    def perf_counter(self) -> float:
        return float(RecordingMachine.programs_started)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextmanager
def shrinking_bounded_by_count(programs: int) -> Iterator[None]:
    """Within the block, Hypothesis shrinks one failure for at most ``programs`` programs."""
    engine: Any = _hypothesis_engine
    saved = {name: getattr(engine, name) for name in _PATCHED if hasattr(engine, name)}
    if len(saved) == len(_PATCHED):
        engine.time = _ProgramClock()
        engine.MAX_SHRINKING_SECONDS = programs
    else:  # a Hypothesis release renamed them: reports may now depend on the machine's speed
        missing = ", ".join(name for name in _PATCHED if name not in saved)
        _log.warning("hypothesis's engine has no %s: shrinking is bounded by time", missing)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(engine, name, value)
