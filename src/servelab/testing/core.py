"""The shared machinery of every topic's invariant checks.

A topic's state machine subclasses :class:`RecordingMachine` so that each call it makes on the
implementation under test is also written down as a line of code a learner can paste. When
Hypothesis finds a failure, the grader shows those lines for the minimal example instead of the
machine's own internals.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from hypothesis.stateful import RuleBasedStateMachine

T = TypeVar("T")

__all__ = [
    "ImplementationHung",
    "InvariantViolation",
    "RecordingMachine",
    "hang_guard",
    "thoroughness",
    "without_local_constants",
]


class InvariantViolation(AssertionError):
    """An invariant of a topic broke.

    ``invariant`` is a short stable id (``"bytes-accounted"``) that the grader maps to a hint,
    so the hint follows from *what* broke rather than from where the check happened to run.
    """

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"[{invariant}] {detail}")
        self.invariant = invariant
        self.detail = detail


class ImplementationHung(BaseException):
    """A call into the implementation did not return in time (an endless loop, most likely).

    A ``BaseException`` on purpose: Hypothesis neither retries nor shrinks it, so a hang is
    reported once, within seconds, instead of being replayed for minutes.
    """

    def __init__(self, code: str, seconds: float) -> None:
        super().__init__(f"`{code}` did not return within {seconds:g} s")
        self.code = code
        self.seconds = seconds


_guard_depth = threading.local()
WALL_FACTOR = 5.0


@contextmanager
def hang_guard(code: str, seconds: float) -> Iterator[None]:
    """Raise :class:`ImplementationHung` if the body spins for ``seconds`` of CPU time.

    Two interval timers interrupt pure-Python loops: CPU time (``seconds``), so a busy machine
    does not make an honest call look hung, and wall time (``WALL_FACTOR`` times longer), so a
    loop that sleeps between retries is caught too. They are armed only in the main thread of a
    POSIX process (where grade cells, pytest and the CLI run) and only by the outermost guard;
    elsewhere the body runs unguarded.
    """
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and getattr(_guard_depth, "n", 0) == 0
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise ImplementationHung(code, seconds)

    previous_real = signal.signal(signal.SIGALRM, on_alarm)
    previous_prof = signal.signal(signal.SIGPROF, on_alarm)
    _guard_depth.n = 1
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, previous_real)
        signal.signal(signal.SIGPROF, previous_prof)
        _guard_depth.n = 0


class RecordingMachine(RuleBasedStateMachine):
    """A state machine that logs every call on the implementation as paste-able code.

    The most recently constructed instance of each subclass is kept in ``last``: Hypothesis
    replays the minimal failing example last, so after a failure ``last.log`` is its program.
    """

    last: ClassVar[RecordingMachine | None] = None
    call_timeout: ClassVar[float] = 2.0

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        type(self).last = self

    def record(self, line: str) -> None:
        """Write down a line of the learner-facing program without running anything."""
        self.log.append(line)

    def do(self, code: str, fn: Callable[[], T]) -> T:
        """Record ``code`` and run ``fn`` (the same call) under the hang guard."""
        self.log.append(code)
        with hang_guard(code, self.call_timeout):
            return fn()


@contextmanager
def without_local_constants() -> Iterator[None]:
    """Make derandomized Hypothesis runs independent of which modules happen to be imported.

    Hypothesis mixes literal constants harvested from every local module loaded so far into the
    values it generates. That makes a derandomized run depend on import history (a grade cell
    after other cells, a test after other tests). Graders promise the same report on every run,
    so they generate without those constants. A no-op if Hypothesis stops offering the hook.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a future Hypothesis layout
        yield
        return
    original = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if original is None or not hasattr(providers, "Constants"):  # pragma: no cover
        yield
        return
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    _clear(cache)
    try:
        yield
    finally:
        providers._get_local_constants = original
        _clear(cache)


def _clear(cache: Any) -> None:
    inner = getattr(cache, "cache", None)
    if inner is not None and hasattr(inner, "clear"):
        inner.clear()


def thoroughness() -> int:
    """How much harder than the learner default the active test profile should search.

    1 for the fast ``dev`` profile, 10 for the ``thorough`` profile that CI uses. Tests scale
    example counts by it instead of hard-coding settings per profile.
    """
    return 10 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1
