"""The shared machinery of every topic's invariant checks.

A topic's state machine subclasses :class:`RecordingMachine` so that each call it makes on the
implementation under test is also written down as a line of code a learner can paste. When
Hypothesis finds a failure, the grader shows those lines for the minimal example instead of the
machine's own internals.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
import sys
import sysconfig
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar, TypeVar

import hypothesis
from hypothesis.stateful import RuleBasedStateMachine

from servelab.testing.pasteable import Caught

T = TypeVar("T")

__all__ = [
    "INVARIANT_READS",
    "ImplementationHung",
    "InvariantViolation",
    "RecordingMachine",
    "WallClockCapped",
    "hang_guard",
    "is_library_code",
    "thoroughness",
    "waiting_s",
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


class WallClockCapped(ImplementationHung):
    """A guarded body stopped by the last-resort wall-clock cap of :func:`hang_guard`: neither
    its CPU time nor its own wall time (time the machine gave to other work not counted) had
    run out, so the machine was too busy to finish it, and it need not hang at all."""

    def __init__(self, code: str, seconds: float) -> None:
        super().__init__(code, seconds)
        self.args = (
            f"`{code}` was stopped after {seconds:g} s of wall-clock time, its own time not "
            "spent: the machine was too busy to finish it",
        )


_LIBRARY_DIRS = tuple(
    str(Path(folder).resolve())
    for folder in (
        str(Path(__file__).resolve().parent.parent),  # servelab
        str(Path(hypothesis.__file__).resolve().parent),
        sysconfig.get_path("stdlib"),
        sysconfig.get_path("platstdlib"),
    )
)


@functools.lru_cache(maxsize=1024)
def is_library_code(filename: str) -> bool:
    """True for servelab's, Hypothesis's and the standard library's files: not learner code.

    Code a grader compiles from a string is named ``<probe>``; any other file, ``<string>``
    included, is the learner's.
    """
    if filename.startswith("<"):
        return filename == "<probe>" or filename.startswith("<frozen ")
    return filename.startswith(_LIBRARY_DIRS) or str(Path(filename).resolve()).startswith(
        _LIBRARY_DIRS
    )


_WEAKREF_FILE = weakref.__file__


def _gc_callback_codes() -> set[Any]:
    """The code objects of the functions in ``gc.callbacks`` (bound methods included)."""
    codes = set()
    for callback in gc.callbacks:
        code = getattr(getattr(callback, "__func__", callback), "__code__", None)
        if code is not None:
            codes.add(code)
    return codes


def _in_finalizer(frame: FrameType | None) -> bool:
    """True inside a ``__del__``, a weakref callback or a ``gc.callbacks`` function (Hypothesis
    registers one), on any frame of the stack.

    An exception raised there cannot reach the grader: Python prints it as "Exception
    ignored in ..." and carries on (and Hypothesis, whose timing callback it interrupted, may
    then report a confusing ``FlakyStrategyDefinition``). The guard waits for the first line
    after the finalizer.
    """
    gc_codes = _gc_callback_codes() if gc.callbacks else ()
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or code.co_filename == _WEAKREF_FILE or code in gc_codes:
            return True
        frame = frame.f_back
    return False


_guard_depth = threading.local()
WALL_FACTOR = 5.0
#: The last-resort cap, in multiples of ``seconds`` and at least ``WALL_CAP_MIN_S``: wall-clock
#: time after which a body is stopped however busy the machine (:class:`WallClockCapped`).
WALL_CAP_FACTOR = 20.0
WALL_CAP_MIN_S = 30.0
REPEAT_S = 0.05
_SCHEDSTAT = "/proc/thread-self/schedstat"
#: The main thread's schedstat, open, by process (a forked child opens its own): every guard
#: reads it as it arms, and opening the file each time cost more than many a guarded call.
_main_schedstat: dict[int, int] = {}


def _main_thread_schedstat() -> bytes:
    pid = os.getpid()
    for _ in range(2):  # a descriptor closed (and its number reused) under us: open it again
        fd = _main_schedstat.get(pid)
        if fd is None:
            for inherited in _main_schedstat.values():
                with contextlib.suppress(OSError):
                    os.close(inherited)
            _main_schedstat.clear()
            fd = _main_schedstat[pid] = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
        try:
            text = os.pread(fd, 128, 0)
        except OSError:
            text = b""
        if len(text.split()) == 3:
            return text
        del _main_schedstat[pid]
    raise OSError(f"{_SCHEDSTAT} reads {text!r}")


def waiting_s() -> float:
    """Seconds this thread has spent ready to run but waiting for a CPU that other work held
    (Linux's schedstat); 0.0 where the kernel does not say."""
    try:
        if threading.current_thread() is threading.main_thread():
            text = _main_thread_schedstat()
        else:
            with open(_SCHEDSTAT, "rb") as stat:
                text = stat.read()
        return int(text.split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


@contextmanager
def hang_guard(code: str, seconds: float, *, wall_cap: float | None = None) -> Iterator[None]:
    """Raise :class:`ImplementationHung` if the body spins for ``seconds`` of CPU time.

    Two interval timers interrupt pure-Python loops: CPU time (``seconds``), so a busy machine
    does not make an honest call look hung, and wall time (``WALL_FACTOR`` times longer), so a
    loop that sleeps between retries is caught too. The wall time counted is the body's own:
    time it spent ready to run while the machine ran other work (:func:`waiting_s`) is left
    out, so on a loaded machine the same body is stopped, or not, as on an idle one. Only
    ``wall_cap`` seconds of wall-clock time (by default ``WALL_CAP_FACTOR`` times ``seconds``,
    at least ``WALL_CAP_MIN_S``), waiting for a CPU included, stop it all the same, as
    :class:`WallClockCapped`: the last resort where the kernel does not report waiting, or a
    machine too busy to finish the body at all. Once fired, they fire again every
    ``REPEAT_S`` until the body ends, and after each alarm the learner's next line raises
    again, so a loop that catches the exception (``while ...: try: ... except: pass``) is still
    stopped; a body that swallowed it and returned is reported as hung all the same. An alarm
    that lands in a finalizer, or while the garbage collector runs, is held back until the
    first line after it: an exception raised there would be printed and lost.

    The collector's own time is not the body's: a full collection walks every object the
    process holds (a grader that has graded all day holds many), so counting it would make the
    same call hang or not depending on what ran before. An alarm that finds the body's own
    time short of its limit sets the timer again for the rest.

    The timers are armed only in the main thread of a POSIX process (where grade cells, pytest
    and the CLI run) and only by the outermost guard; elsewhere the body runs unguarded. A loop
    inside one C call (``sum(range(10**12))``) never reaches a Python frame, so only a process
    boundary can stop it: the CLI grades in a child process for that reason.
    """
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and getattr(_guard_depth, "n", 0) == 0
    )
    if not usable:
        yield
        return

    cap = max(seconds * WALL_CAP_FACTOR, WALL_CAP_MIN_S) if wall_cap is None else wall_cap
    state = {"armed": True, "fired": False, "collecting": False, "capped": False}
    clocks = (time.process_time, time.perf_counter)  # what ITIMER_PROF and ITIMER_REAL count
    started = [clock() for clock in clocks]
    waited = waiting_s()
    collected = [0.0, 0.0]  # the collector's time so far, on each clock
    collecting_since = [0.0, 0.0]

    def note_collection(phase: str, info: dict[str, Any]) -> None:
        # The collector finalizes garbage (generators, __del__, weakref callbacks) between
        # its "start" and "stop" callbacks: an exception raised there would be lost too.
        now = [clock() for clock in clocks]
        if phase == "start":
            collecting_since[:] = now
        elif state["collecting"]:
            for i in range(2):
                collected[i] += now[i] - collecting_since[i]
        state["collecting"] = phase == "start"

    def time_left(signum: int) -> float:
        """What the body has left on the timer that fired, the collector's time not counted
        (nor, on the wall clock, time spent waiting for a CPU, up to the cap)."""
        i = 0 if signum == signal.SIGPROF else 1
        now = clocks[i]()
        spent = now - started[i] - collected[i]
        if state["collecting"]:
            spent -= now - collecting_since[i]
        if i == 0:
            return seconds - spent
        capped = cap - spent  # the collector's time left out, waiting for a CPU counted
        if capped <= 0:
            state["capped"] = True
            return 0.0
        left = seconds * WALL_FACTOR - spent + (waiting_s() - waited)
        return min(left, capped) if left > 0 else left

    def hung() -> ImplementationHung:
        return WallClockCapped(code, cap) if state["capped"] else ImplementationHung(code, seconds)

    def again_on_next_line(frame: FrameType, event: str, arg: Any) -> Any:
        # Raised from the learner's next line: inside an ``except:`` that caught the last one,
        # it escapes that ``try`` (Python then turns tracing off until the next alarm).
        if not state["armed"]:
            return None
        if (
            event == "line"
            and not is_library_code(frame.f_code.co_filename)
            and not state["collecting"]
            and not _in_finalizer(frame)
        ):
            raise hung()
        return again_on_next_line

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if not state["armed"]:
            return
        if not state["fired"]:
            left = time_left(signum)
            if left > 0:  # the collector took part of the time: the body still has the rest
                which = signal.ITIMER_PROF if signum == signal.SIGPROF else signal.ITIMER_REAL
                signal.setitimer(which, max(left, 0.001), REPEAT_S)
                return
        first = not state["fired"]
        state["fired"] = True
        sys.settrace(again_on_next_line)
        in_finalizer = state["collecting"] or _in_finalizer(frame)
        in_learner_code = False
        while frame is not None:
            if not is_library_code(frame.f_code.co_filename):
                frame.f_trace = again_on_next_line
                in_learner_code = True
            frame = frame.f_back
        if in_finalizer:
            return  # the next line outside the finalizer raises (see _in_finalizer)
        if first or in_learner_code:  # later alarms leave library frames to the tracer
            raise hung()

    previous_trace = sys.gettrace()
    previous_real = signal.signal(signal.SIGALRM, on_alarm)
    previous_prof = signal.signal(signal.SIGPROF, on_alarm)
    _guard_depth.n = 1
    gc.callbacks.insert(0, note_collection)  # first at "start", so the flag covers the rest
    signal.setitimer(signal.ITIMER_PROF, seconds, REPEAT_S)
    signal.setitimer(signal.ITIMER_REAL, min(seconds * WALL_FACTOR, cap), REPEAT_S)
    try:
        yield
    except BaseException as exc:
        state["armed"] = False
        if state["fired"] and not isinstance(exc, ImplementationHung | GeneratorExit):
            raise hung() from exc
        raise
    finally:
        state["armed"] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        if note_collection in gc.callbacks:
            gc.callbacks.remove(note_collection)
        if state["fired"]:
            sys.settrace(previous_trace)
        signal.signal(signal.SIGALRM, previous_real)
        signal.signal(signal.SIGPROF, previous_prof)
        _guard_depth.n = 0
    if state["fired"]:  # the body caught every ImplementationHung and then returned
        raise hung()


#: What a hang in an invariant's read is called: the reads follow the program's last line.
INVARIANT_READS = "a read of your object by the check"


class RecordingMachine(RuleBasedStateMachine):
    """A state machine that logs every call on the implementation as paste-able code.

    The most recently constructed instance of each subclass is kept in ``last``: Hypothesis
    replays the minimal failing example last, so after a failure ``last.log`` is its program.
    """

    last: ClassVar[RecordingMachine | None] = None
    call_timeout: ClassVar[float] = 2.0
    #: Programs started by every machine so far: the grader bounds shrinking by this count.
    programs_started: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        self.caught = Caught(self.log)
        type(self).last = self
        RecordingMachine.programs_started += 1

    def record(self, line: str) -> None:
        """Write down a line of the learner-facing program without running anything."""
        self.caught.went_on()
        self.log.append(line)

    def do(self, code: str, fn: Callable[[], T]) -> T:
        """Record ``code`` and run ``fn`` (the same call) under the hang guard; an error it
        raises that the rule catches is written so that the pasted program goes on."""
        self.caught.went_on()
        self.log.append(code)
        with hang_guard(code, self.call_timeout):
            try:
                return fn()
            except Exception as exc:
                self.caught.raised(exc)
                raise

    def check_invariants(self, *args: Any, **kwargs: Any) -> None:
        """The invariants read the learner's object (``len(policy)``, its eviction order):
        under the hang guard as a call is, so a read that never returns is one hang, reported
        within seconds, not a program Hypothesis replays and shrinks for minutes."""
        with hang_guard(INVARIANT_READS, self.call_timeout):
            super().check_invariants(*args, **kwargs)

    def program(self, failure: BaseException | None) -> str:
        """The program that ended with ``failure``, as the report's reproduce: lines."""
        self.caught.failed_with(failure)
        return "\n".join(self.log)


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
