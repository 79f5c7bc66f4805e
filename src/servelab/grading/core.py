"""grade(topic, impl, step): run a topic's checks on any implementation and report.

A topic is a list of steps. Each step has *probes* — small targeted scenarios, each of which
names one known mistake in its hint — and optionally a Hypothesis state machine that compares
the implementation with an executable model and searches for everything nobody listed.
``grade(..., step=N)`` runs the probes of steps 1..N, then the state machine of step N.

Design choices, each for the learner in front of a grade cell:

* probes run first: they fail in milliseconds and name the mistake precisely;
* Hypothesis runs derandomized with ``database=None``, so a report is the same on every run and
  no ``.hypothesis/`` folder appears beside a notebook; shrinking is bounded in time;
* an implementation that never returns is reported as such within seconds
  (:class:`~servelab.testing.core.ImplementationHung`);
* ``NotImplementedError`` from the implementation is re-raised as it is: an unfinished step is
  not a wrong one;
* on failure the report is printed *and* ``GradeFailure`` is raised, so a notebook whose stored
  outputs were edited still fails under ``pytest --nbval-lax``.
"""

from __future__ import annotations

import importlib
import io
import os
import pkgutil
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import hypothesis.configuration
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.errors import Flaky
from hypothesis.internal.conjecture import engine as _hypothesis_engine
from hypothesis.stateful import run_state_machine_as_test

from servelab.testing.core import (
    ImplementationHung,
    InvariantViolation,
    RecordingMachine,
    hang_guard,
    without_local_constants,
)

__all__ = [
    "GradeFailure",
    "MachineCheck",
    "Probe",
    "ProbeFailed",
    "Report",
    "Step",
    "Topic",
    "grade",
    "load_topic",
    "topics",
]

PROBE_TIMEOUT_S = 5.0
_HOME_MOVED: list[bool] = []
SHRINK_BUDGET_S = 4.0


class ProbeFailed(AssertionError):
    """A probe saw the wrong behaviour. ``code`` is the scenario as paste-able lines.

    ``hint`` overrides the probe's own hint when the probe can tell that a different mistake
    than the one it targets produced the failure (an eviction count off inside a recency probe).
    """

    def __init__(
        self, message: str, code: Sequence[str] | str = (), hint: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if isinstance(code, str) else "\n".join(code)
        self.hint = hint


class GradeFailure(AssertionError):
    """Raised by :func:`grade` when a check fails; the message is the whole report."""

    def __init__(self, report: Report) -> None:
        super().__init__(report.text)
        self.report = report


@dataclass(frozen=True)
class Probe:
    """A targeted scenario that catches one known mistake; ``hint`` names that mistake."""

    name: str
    hint: str
    run: Callable[[Any], None]


@dataclass(frozen=True)
class MachineCheck:
    """A Hypothesis state machine over the implementation, compared with a model."""

    name: str
    build: Callable[[Any], type[RecordingMachine]]
    invariants: Sequence[str]
    hints: Mapping[str, str] = field(default_factory=dict)
    max_examples: int = 150
    step_count: int = 30
    generic_hint: str = (
        "compare the calls above with the rules of this step; the model's expectation is "
        "in the message"
    )


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    probes: Sequence[Probe] = ()
    machine: MachineCheck | None = None


@dataclass(frozen=True)
class Topic:
    name: str
    title: str
    steps: Sequence[Step]

    def step(self, number: int) -> Step:
        for s in self.steps:
            if s.number == number:
                return s
        valid = ", ".join(str(s.number) for s in self.steps)
        raise ValueError(f"topic {self.name!r} has no step {number}; its steps are {valid}")


@dataclass
class Report:
    """What a grade run found. ``text`` is deterministic: no timings, no seeds."""

    topic: str
    step: int | None
    lines: list[str] = field(default_factory=list)
    passed: bool = True
    hint: str = ""
    code: str = ""

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        where = f" step {self.step}" if self.step is not None else ""
        return f"<grade {self.topic}{where}: {verdict}>"


def topics() -> list[str]:
    """Names of every topic that ships with servelab (one module each in this package)."""
    names = []
    for info in pkgutil.iter_modules(_package_path()):
        if info.name in {"core", "cli", "diagnose", "mistakes"} or info.name.startswith("_"):
            continue
        names.append(info.name.replace("_", "-"))
    return sorted(names)


def _package_path() -> list[str]:
    package = importlib.import_module("servelab.grading")
    return list(package.__path__)


def load_topic(name: str) -> Topic:
    """Import ``servelab.grading.<name>`` and return its ``TOPIC``."""
    module_name = name.replace("-", "_")
    if not module_name.replace("_", "").isalnum():
        raise ValueError(f"not a topic name: {name!r}")
    try:
        module = importlib.import_module(f"servelab.grading.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"servelab.grading.{module_name}":
            raise
        known = ", ".join(topics())
        raise ValueError(f"unknown topic {name!r}; known topics: {known}") from None
    topic = getattr(module, "TOPIC", None)
    if not isinstance(topic, Topic):
        raise ValueError(f"servelab.grading.{module_name} defines no TOPIC")
    return topic


def _indent(text: str, by: str = "      ") -> list[str]:
    return [by + line if line else line for line in text.splitlines()]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, InvariantViolation):
        return exc.detail
    if isinstance(exc, ProbeFailed):
        return exc.message
    name = type(exc).__name__
    return f"{name}: {exc}" if str(exc) else name


def _learner_frame(exc: BaseException) -> str:
    """The last traceback line outside servelab and hypothesis: where the learner's code broke."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/servelab/" not in path and "/hypothesis/" not in path:
            return f"{frame.name}() line {frame.lineno}: {frame.line or ''}".rstrip(": ")
    return ""


@contextmanager
def _bounded_shrinking(seconds: float) -> Any:
    """Cap Hypothesis's shrink phase (5 minutes by default) so a failing grade cell answers fast."""
    previous = getattr(_hypothesis_engine, "MAX_SHRINKING_SECONDS", None)
    if previous is not None:
        _hypothesis_engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        if previous is not None:
            _hypothesis_engine.MAX_SHRINKING_SECONDS = previous


def _not_implemented(exc: BaseException) -> NotImplementedError | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, NotImplementedError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    for inner in getattr(exc, "exceptions", ()):
        if isinstance(inner, BaseException):
            found = _not_implemented(inner)
            if found is not None:
                return found
    return None


def _run_probe(probe: Probe, impl: Any) -> BaseException | None:
    try:
        with hang_guard(f"probe {probe.name!r}", PROBE_TIMEOUT_S):
            probe.run(impl)
    except ImplementationHung as exc:
        return exc
    except NotImplementedError:
        raise
    except Exception as exc:
        return exc
    return None


def _run_machine(check: MachineCheck, impl: Any) -> tuple[BaseException | None, str]:
    machine = check.build(impl)
    machine.last = None
    chosen = settings(
        max_examples=check.max_examples,
        stateful_step_count=check.step_count,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    sink = io.StringIO()
    try:
        with (
            _bounded_shrinking(SHRINK_BUDGET_S),
            without_local_constants(),
            redirect_stdout(sink),
        ):
            run_state_machine_as_test(machine, settings=chosen)
    except ImplementationHung as exc:
        code = "\n".join(machine.last.log) if machine.last else ""
        return exc, code
    except NotImplementedError:
        raise
    except Flaky as exc:
        code = "\n".join(machine.last.log) if machine.last else ""
        return exc, code
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        missing = _not_implemented(exc)
        if missing is not None:
            raise missing from None
        code = "\n".join(machine.last.log) if machine.last else ""
        return exc, code
    return None, ""


def _keep_hypothesis_files_out_of_the_notebook_folder() -> None:
    """Hypothesis writes ``.hypothesis/`` into the working directory even without a database."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or _HOME_MOVED:
        return
    hypothesis.configuration.set_hypothesis_home_dir(
        Path(tempfile.gettempdir()) / "servelab-hypothesis"
    )
    _HOME_MOVED.append(True)


def grade(
    topic: str | Topic,
    impl: Any,
    step: int | None = None,
    *,
    out: TextIO | None = None,
    quiet: bool = False,
) -> Report:
    """Grade ``impl`` on ``topic`` up to ``step`` (all steps when None).

    Prints a short deterministic report and returns it when everything passes; raises
    :class:`GradeFailure` (whose message is the report) on the first failing check.
    """
    __tracebackhide__ = True
    _keep_hypothesis_files_out_of_the_notebook_folder()
    the_topic = load_topic(topic) if isinstance(topic, str) else topic
    steps = list(the_topic.steps)
    if step is not None:
        target = the_topic.step(step)
        steps = [s for s in steps if s.number <= target.number]
    final = steps[-1]
    report = Report(topic=the_topic.name, step=step)
    head = f"{the_topic.name} · step {final.number} of {len(the_topic.steps)}: {final.title}"
    if step is None:
        head = f"{the_topic.name} · all {len(the_topic.steps)} steps"
    report.lines.append(head)

    failure: tuple[str, BaseException, str, str] | None = None  # (check, exc, hint, code)
    for s in steps:
        passed_here = 0
        for probe in s.probes:
            exc = _run_probe(probe, impl)
            label = f"step {s.number} · {probe.name}"
            if exc is None:
                passed_here += 1
                if s is final:
                    report.lines.append(f"  ✓ {label}")
                continue
            code = exc.code if isinstance(exc, ProbeFailed) else ""
            hint = probe.hint
            if isinstance(exc, ProbeFailed) and exc.hint:
                hint = exc.hint
            if isinstance(exc, ImplementationHung):
                hint = f"a call never returned — an endless loop? {probe.hint}"
            failure = (label, exc, hint, code)
            break
        if failure:
            break
        if s is not final and s.probes:
            report.lines.append(f"  ✓ step {s.number} · {s.title} ({passed_here} checks)")

    if failure is None and final.machine is not None:
        check = final.machine
        exc, code = _run_machine(check, impl)
        label = f"step {final.number} · {check.name}"
        if exc is None:
            report.lines.append(
                f"  ✓ {label}: {check.max_examples} random programs of up to "
                f"{check.step_count} calls agree with the model"
            )
            report.lines.append("      invariants: " + "; ".join(check.invariants))
        else:
            if isinstance(exc, InvariantViolation):
                hint = check.hints.get(exc.invariant, check.generic_hint)
            elif isinstance(exc, ImplementationHung):
                hint = (
                    "a call never returned — an eviction or retry loop that cannot make "
                    "progress? Check how the loop ends when nothing can be removed."
                )
            else:
                hint = check.hints.get("exception", check.generic_hint)
            failure = (label, exc, hint, code)

    if failure is None:
        report.lines.append("PASSED")
        if not quiet:
            print(report.text, file=out)
        return report

    label, exc, hint, code = failure
    report.passed = False
    report.hint = hint
    report.code = code
    report.lines.append(f"  ✗ {label}")
    report.lines.extend(_indent(_describe(exc)))
    where = _learner_frame(exc)
    if where and not isinstance(exc, ProbeFailed | InvariantViolation):
        report.lines.append(f"      raised in {where}")
    if code:
        report.lines.append("    reproduce:")
        report.lines.extend(_indent(code, "      "))
    report.lines.append(f"    hint: {hint}")
    report.lines.append("FAILED")
    if not quiet:
        print(report.text, file=out)
    raise GradeFailure(report)
