"""grade(topic, impl, step): run a topic's checks on any implementation and report.

A topic is a list of steps. Each step has *probes* — small targeted scenarios, each of which
names one known mistake in its hint — and optionally a Hypothesis state machine that compares
the implementation with an executable model and searches for everything nobody listed.
``grade(..., step=N)`` runs the probes of steps 1..N, then the state machine of step N.

Design choices, each for the learner in front of a grade cell:

* probes run first: they fail in milliseconds and name the mistake precisely;
* the report depends only on the implementation: Hypothesis runs derandomized with
  ``database=None`` (no ``.hypothesis/`` folder beside a notebook either), and shrinking is
  bounded by a number of programs (:data:`SHRINK_PROGRAMS`), never by wall time;
* a class stacked on a stale copy of itself (a cell run twice in the ``class X(X)`` style) is
  not diagnosed: the report asks to restart the kernel and run all cells;
* an unfinished step is not a wrong one: ``NotImplementedError`` from the implementation is
  reported as "step 3: `pin` is not written yet" (the step graded, the method that raised)
  and raised as :class:`StepNotWritten`;
* an exception from the learner's code is reported with the learner's method and line, the
  call in progress and a hint about that exception, never with the grader's frames;
* an implementation that never returns is reported as such within seconds
  (:class:`~servelab.testing.core.ImplementationHung`), even when it catches the exception;
* ``SystemExit`` and ``KeyboardInterrupt`` raised by the implementation fail the grade, and so
  does any other exception from it, Hypothesis's own control exceptions (``reject()``) and
  ``BaseException`` subclasses included; a passing report states how many programs ran;
* a real Ctrl-C (the stop button) ends the grade with :class:`GradeInterrupted`, one line;
* the report is printed once. On failure :class:`GradeFailure` is raised as well, so a notebook
  whose stored outputs were edited still fails under ``pytest --nbval-lax``; in IPython its
  traceback is one line (``_render_traceback_``), so the report is not shown twice. A
  :class:`Report` that was printed displays as nothing (``_ipython_display_``), so in Jupyter a
  passing cell shows the report and no ``Out[n]:``.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import hypothesis.configuration
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.errors import Flaky, HypothesisDeprecationWarning

from servelab.grading._interrupts import Interrupts as _Interrupts
from servelab.grading._interrupts import learner_escape as _learner_escape
from servelab.grading._learner import (
    exception_hint,
    learner_frame,
    looping_frame,
    program_in_progress,
    stacking_problem,
    traceback_of,
    unreached,
)
from servelab.grading._programs import run_programs, shrinking_bounded_by_count
from servelab.grading._script import graded_names, renamed
from servelab.grading.about import About, at_step
from servelab.grading.check_side import check_stopped
from servelab.grading.diagnose import (
    Finding,
    explained,
    grafted_raise,
    later_raise,
    located,
    own_error,
    raised_outside,
    topic_hook,
    with_place,
)
from servelab.grading.ending import shown_at_end
from servelab.grading.failures import GradeFailure, GradeInterrupted, StepNotWritten
from servelab.grading.no_return import none_returned
from servelab.grading.registry import load_topic, topics
from servelab.grading.steady import (
    BUSY_HINT,
    cut_short,
    diagnosis_budget,
    hang_line,
    stable_text,
)
from servelab.grading.structure_picture import picture
from servelab.grading.topic import (
    Diagnose,
    MachineCheck,
    Probe,
    ProbeFailed,
    Step,
    Topic,
)
from servelab.testing.bounded import bounded_str
from servelab.testing.core import (
    INVARIANT_READS,
    ImplementationHung,
    InvariantViolation,
    WallClockCapped,
    hang_guard,
    without_local_constants,
)

__all__ = [
    "Diagnose",
    "GradeFailure",
    "GradeInterrupted",
    "MachineCheck",
    "Probe",
    "ProbeFailed",
    "Report",
    "Step",
    "StepNotWritten",
    "Topic",
    "grade",
    "load_topic",
    "topics",
]

PROBE_TIMEOUT_S = 3.0
HANG_HINT = (
    "a call never returned — an eviction or retry loop that cannot make progress? Check how "
    "each loop ends, including when nothing can be removed"
)
_HOME_MOVED: list[bool] = []
_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from servelab.grading.localise import Divergence


@dataclass
class Report:
    """What a grade run found. ``text`` is deterministic: no timings, no seeds."""

    topic: str
    step: int | None
    lines: list[str] = field(default_factory=list)
    passed: bool = True
    hint: str = ""
    code: str = ""
    #: "passed", "failed", or "not written" (a method of the graded steps is still a stub).
    verdict: str = "passed"
    printed: bool = field(default=False, compare=False, repr=False)
    #: HTML drawing of the first diverging call (:mod:`servelab.grading.structure_picture`):
    #: the learner's state beside the reference's; shown under the report in a notebook.
    picture: str | None = field(default=None, compare=False, repr=False)
    #: The hint this failure shows for a diagnosis's finding and the check's hint
    #: (:func:`shown_for`, with the check's error and program): the catalogue's measure asks
    #: it, so the two cannot choose differently. None: the failure shows its hint whatever
    #: is found.
    choice: Callable[[Finding, str], str] | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def summary(self) -> str:
        """One line: topic, step and verdict (the traceback line of a failing grade cell)."""
        where = f" step {self.step}" if self.step is not None else ""
        if self.verdict == "not written":
            return f"{self.topic}{where} is not finished (see the report above)"
        verdict = "passed" if self.passed else "failed (see the report above)"
        return f"{self.topic}{where} {verdict}"

    def __repr__(self) -> str:
        return f"<grade {self.summary}>"

    def _ipython_display_(self) -> None:
        """In IPython, show nothing more when :func:`grade` has printed the report already."""
        if not self.printed:
            print(self.text)


def _indent(text: str, by: str = "      ") -> list[str]:
    return [by + line if line else line for line in text.splitlines()]


#: CUDA's words for a kernel that touched an address outside its tensors; such an error is
#: sticky: the process's CUDA context is lost, and every later CUDA call fails the same way.
_CUDA_LOST = "an illegal memory access was encountered"
CUDA_LOST_NOTE = (
    "on a GPU this error lasts: every later CUDA call in this Python process fails the same "
    "way, a correct kernel's too, until you restart the kernel"
)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, InvariantViolation):
        return exc.detail
    if isinstance(exc, ProbeFailed):
        return exc.message
    name = type(exc).__name__
    shown, text = bounded_str(exc)  # the learner's __str__ may recurse, raise or loop
    if not shown:
        return f"{name} ({text})"
    if _CUDA_LOST in text:  # CUDA's advice on debugging flags says nothing to a learner
        return f"{name}: {text.splitlines()[0]}\n({CUDA_LOST_NOTE})"
    return f"{name}: {text}" if text else name


class _NotWritten(Exception):
    """Internal: a NotImplementedError from the implementation, found while running checks."""

    def __init__(self, cause: NotImplementedError) -> None:
        super().__init__()  # not str(cause): that would run the learner's __str__
        self.cause = cause


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


def _run_probe(probe: Probe, impl: Any, interrupts: _Interrupts) -> BaseException | None:
    try:
        seconds = PROBE_TIMEOUT_S if probe.seconds is None else probe.seconds
        with hang_guard(f"probe {probe.name!r}", seconds):
            probe.run(impl)
    except ImplementationHung as exc:
        return exc
    except NotImplementedError as exc:
        raise _NotWritten(exc) from exc
    except Exception as exc:
        missing = _not_implemented(exc)
        if missing is not None:
            raise _NotWritten(missing) from exc
        return exc
    except (SystemExit, KeyboardInterrupt) as exc:
        if _learner_escape(exc, interrupts):
            return exc
        raise
    except BaseException as exc:  # a learner's BaseException subclass, Hypothesis's StopTest
        return exc
    return None


def _run_machine(
    check: MachineCheck, impl: Any, interrupts: _Interrupts, ran: list[int] | None = None
) -> tuple[BaseException | None, str]:
    """(the failure or None, its program); appends to ``ran`` how many programs ran to their end."""
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
            shrinking_bounded_by_count(check.shrink_programs),
            without_local_constants(),
            redirect_stdout(sink),
        ):
            count, raised = run_programs(machine, chosen)
    except (ImplementationHung, Flaky) as exc:
        return exc, machine.last.program(exc) if machine.last else ""
    except BaseException as exc:
        if isinstance(exc, SystemExit | KeyboardInterrupt) and not _learner_escape(exc, interrupts):
            raise
        raised = exc
    if raised is None:
        if ran is not None:
            ran.append(count)
        return None, ""
    missing = _not_implemented(raised)
    if missing is not None:
        raise _NotWritten(missing) from None
    return raised, machine.last.program(raised) if machine.last else ""


def _keep_hypothesis_files_out_of_the_notebook_folder() -> None:
    """Hypothesis writes ``.hypothesis/`` into the working directory even without a database."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or _HOME_MOVED:
        return
    home = Path(tempfile.gettempdir()) / "servelab-hypothesis"
    hypothesis.configuration.set_hypothesis_home_dir(home)
    _HOME_MOVED.append(True)


@dataclass
class _Failure:
    label: str
    exc: BaseException
    hint: str
    code: str
    where: tuple[str, ...] = ()
    divergence: Divergence | None = None
    choice: Callable[[Finding, str], str] | None = None


def _hypothesis_flaky(exc: BaseException) -> bool:
    """Hypothesis found the implementation inconsistent (not a ``Flaky`` the learner raised)."""
    return isinstance(exc, Flaky) and learner_frame(exc) is None


def _learner_exception(exc: BaseException) -> bool:
    if isinstance(exc, ProbeFailed | InvariantViolation | ImplementationHung):
        return False
    return not _hypothesis_flaky(exc)


def _diagnosed(
    topic: Topic,
    code: str,
    impl: Any,
    exc: BaseException | None,
    step: int | None,
    hint: str,
    check_hint: str | None = None,
) -> tuple[str, tuple[str, ...], Divergence | None]:
    """The hint to show, the lines that show where the difference starts and the first
    diverging call (to draw); ``check_hint``, the check's own hint, stands after the place of a
    learner's own Python error where it fits (``hint`` there names only the error's type). The
    topic's own
    ``diagnose`` hook when it has one, else localisation and the catalogue of known mistakes
    (:mod:`servelab.grading.diagnose`). A failure inside diagnosis never hides the check's
    hint: it is logged, and re-raised when the environment sets ``SERVELAB_DEBUG=1``."""
    if exc is not None and not isinstance(exc, Exception):
        # SystemExit, KeyboardInterrupt: replaying them would only raise again
        return hint, (), None
    try:
        with diagnosis_budget():
            if topic.diagnose is not None:
                found = topic.diagnose(code.splitlines(), impl) if code else None
                return (found if isinstance(found, str) and found else hint), (), None
            finding = explained(topic.name, code, exc, impl, step)
            shown = shown_for(finding, topic.name, hint, exc, code, check_hint)
            return shown, finding.where, finding.divergence
    except (Exception, ImplementationHung) as error:
        _log.warning("diagnosis of a failed %s check failed: %r", topic.name, error)
        if os.environ.get("SERVELAB_DEBUG") == "1":
            raise
        return cut_short(hint, error), (), None


def shown_for(
    finding: Finding,
    topic: str,
    hint: str,
    exc: BaseException | None,
    code: str,
    check_hint: str | None = None,
) -> str:
    """The hint a failed check shows for diagnosis's ``finding``: the one place this choice
    is made, for a report and for the catalogue's measure of it (:attr:`Report.choice`).
    ``hint`` is the check's hint as the failure stands (the error's own where the learner's
    code raised), ``check_hint`` the check's own, which follows the place of a learner's
    Python error where it fits."""
    # a rule's hint is shown only where it fits; one about the learner's exception
    # describes the evidence itself
    ruled = (
        exc is None or isinstance(exc, InvariantViolation | ProbeFailed) or not exception_hint(exc)
    )
    own = own_error(exc)
    if own is None and not ruled and finding.divergence is not None:
        own = raised_outside(exc)  # a Python error from code under yours (a super())
    if not ruled and (grafted := grafted_raise(finding, exc)):
        return grafted
    if finding.raised:  # the learner's own error, placed: the check's hint if it fits
        return with_place(finding, check_hint or hint)
    if finding.place and not finding.hint and (told := none_returned(finding.divergence, exc)):
        return told
    if own is not None and finding.place and not finding.hint:
        # raised after the first difference: the place, then where it was raised;
        # the type's usual cause and a check's hint would guess between the two
        stop = "" if finding.place.endswith(("?", ".")) else "."
        later = (d := finding.divergence) is None or d.mine[0] != f"raised {own.kind}"
        return f"{finding.place}{stop} {later_raise(own, later)}"
    return with_place(finding, hint, ruled, code, topic_hook(topic) is not None, topic)


def _shown_for_hint(
    finding: Finding,
    hint: str,
    *,
    topic: str,
    exc: BaseException | None,
    code: str,
    check_hint: str | None,
) -> str:
    return shown_for(finding, topic, hint, exc, code, check_hint)


def _finish(report: Report, out: TextIO | None, quiet: bool) -> None:
    report.lines = [stable_text(line) for line in report.lines]
    report.hint = stable_text(report.hint)
    if not quiet:
        print(report.text, file=out)
        report.printed = True
        if report.picture is not None and out is None and _in_notebook():
            _display_html(report.picture)


def _in_notebook() -> bool:
    """A Jupyter kernel runs this grade (a terminal shows the report's words alone)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def _display_html(html: str) -> None:
    """Show ``html`` as a notebook output of its own: HTML only, no text for a terminal."""
    from IPython.display import display

    display({"text/html": html}, raw=True)  # type: ignore[no-untyped-call]


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
    :class:`GradeFailure` (whose message is the report) on the first failing check,
    :class:`StepNotWritten` when a method of the graded steps is not written yet, and
    :class:`GradeInterrupted`, printing nothing, on a real Ctrl-C.
    """
    __tracebackhide__ = True
    interrupts = _Interrupts()
    try:
        with interrupts.watch(), warnings.catch_warnings():
            # reject() in the learner's code warns outside a Hypothesis test; the report says more
            warnings.simplefilter("ignore", HypothesisDeprecationWarning)
            return _grade(topic, impl, step, out, quiet, interrupts)
    except BaseException:
        if not interrupts.real:
            raise
    name = topic if isinstance(topic, str) else topic.name
    raise GradeInterrupted(name, step) from None


def _grade(
    topic: str | Topic,
    impl: Any,
    step: int | None,
    out: TextIO | None,
    quiet: bool,
    interrupts: _Interrupts,
) -> Report:
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
    if step is None and len(the_topic.steps) > 1:  # one step: graded as that step
        head = f"{the_topic.name} · all {len(the_topic.steps)} steps"
    report.lines.append(head)

    stale = stacking_problem(impl)
    if stale is None and the_topic.misfit is not None:
        stale = the_topic.misfit(impl, final.number)
    if stale is not None:
        what, hint = stale
        report.passed, report.verdict, report.hint = False, "failed", hint
        report.lines += [f"  ✗ {what}", f"    hint: {hint}", "FAILED"]
        _finish(report, out, quiet)
        raise GradeFailure(report)

    try:
        every_step = step is None and len(steps) > 1
        with the_topic.around():
            failure = _run_checks(steps, final, impl, report, interrupts, the_topic, every_step)
    except _NotWritten as missing:
        report.passed, report.verdict = False, "not written"
        frame = learner_frame(missing.cause)
        method = f"`{frame.name}`" if frame is not None else "a method"
        report.lines += [f"  ✗ step {final.number}: {method} is not written yet", "NOT FINISHED"]
        _finish(report, out, quiet)
        raise StepNotWritten(report) from None
    if interrupts.real:  # a Ctrl-C that the learner's code caught: the checks saw it
        raise KeyboardInterrupt

    if failure is None:
        report.lines.append("PASSED")
        _finish(report, out, quiet)
        return report

    report.passed, report.verdict = False, "failed"
    report.hint, report.code = failure.hint, failure.code
    report.choice = failure.choice
    exc = failure.exc
    program = failure.code.splitlines()
    report.lines.append(f"  ✗ {failure.label}")
    if isinstance(exc, ImplementationHung) and program:
        hung = f"`{program[-1]}`"
        if exc.code == INVARIANT_READS:  # the call returned; what the check read after it hung
            hung = f"after `{program[-1]}` returned, {exc.code}"
        report.lines.append(f"      {hang_line(hung, exc)}")
    else:
        report.lines.extend(_indent(_describe(exc)))
    if _learner_exception(exc) or isinstance(exc, ImplementationHung):
        # A hang the learner's code caught and turned into another exception carries the
        # learner's frames on its cause.
        cause = exc.__cause__ if isinstance(exc, ImplementationHung) else None
        find = looping_frame if isinstance(exc, ImplementationHung) else learner_frame
        frame = find(exc) or (find(cause) if cause is not None else None)
        if frame is not None:
            source = (frame.line or "").strip()
            verb = "looping" if isinstance(exc, ImplementationHung) else "raised"
            report.lines.append(
                f"      {verb} in your {frame.name}(), line {frame.lineno}"
                + (f": {source}" if source else "")
            )
        if program and not isinstance(exc, ImplementationHung):
            report.lines.append(f"      while running: {program[-1]}")
    if failure.code:
        report.lines.append("    reproduce:")
        report.lines.extend(_indent(failure.code, "      "))
    if failure.where:
        report.lines.append(f"    where: {failure.where[0]}")
        report.lines.extend(f"      {line}" for line in failure.where[1:])
    report.lines.append(f"    hint: {failure.hint}")
    report.lines.append("FAILED")
    d = failure.divergence
    if d is not None:
        report.picture = picture(the_topic.name, d)
    _finish(report, out, quiet)
    raise GradeFailure(report)


def _run_checks(
    steps: Sequence[Step],
    final: Step,
    impl: Any,
    report: Report,
    interrupts: _Interrupts,
    topic: Topic,
    every_step: bool = False,
) -> _Failure | None:
    """Run the probes of every step, then the final step's machine; the first failure or None.
    The grade of every step (``every_step``) then runs the earlier machines that ask for it
    (:attr:`MachineCheck.in_final_grade`), so what one of them catches never passes it; what
    the final machine catches is reported as before. A grade of one step runs those whose
    every rule its own machine lists too (:func:`_restated`): a passing report names those
    rules as checked, so they are checked as hard as at their own step."""
    for s in steps:
        passed_here = 0
        for probe in s.probes:
            exc = _run_probe(probe, impl, interrupts)
            label = f"step {s.number} · {probe.name}"
            if exc is None:
                passed_here += 1
                if s is final:
                    report.lines.append(f"  ✓ {label}")
                continue
            return _probe_failure(probe, label, exc, impl, topic, final.number)
        if s is not final and s.probes:
            report.lines.append(f"  ✓ step {s.number} · {s.title} ({passed_here} checks)")

    failure = _machine_check(final, impl, report, interrupts, topic, final.number)
    earlier = [s for s in steps if s is not final and s.machine and s.machine.in_final_grade]
    if not every_step:
        earlier = [s for s in earlier if _restated(s, final)]
    for s in earlier if failure is None else ():
        failure = _machine_check(s, impl, report, interrupts, topic, final.number)
        if failure is not None:
            return failure
    return failure


def _restated(earlier: Step, final: Step) -> bool:
    """Every rule of ``earlier``'s machine is one ``final``'s machine lists too (kv-offload's
    hierarchy rules, which the cost model's machine checks in programs it shares with its
    own calls: fewer of them reach a promotion from disk than step 3's own programs do)."""
    if earlier.machine is None or final.machine is None:
        return False
    return set(earlier.machine.invariants) <= set(final.machine.invariants)


def _machine_check(
    s: Step, impl: Any, report: Report, interrupts: _Interrupts, topic: Topic, final: int
) -> _Failure | None:
    """Run ``s``'s state machine, if any: its failure, or None with its line in ``report``
    (the rules it checked only for the last step, ``final``: a report stays short)."""
    if s.machine is None:
        return None
    check = s.machine
    counted: list[int] = []
    exc, code = _run_machine(check, impl, interrupts, counted)
    code = renamed(code, graded_names(topic.replay, impl))  # the learner's class names
    label = f"step {s.number} · {check.name}"
    if exc is None:
        ran = counted[-1] if counted else 0
        programs = "1 random program" if ran == 1 else f"{ran} random programs"
        report.lines.append(
            f"  ✓ {label}: {programs} of up to {check.step_count} calls "
            + ("agrees" if ran == 1 else "agree")
            + " with the model"
        )
        if s.number == final:
            report.lines.append("      invariants: " + "; ".join(check.invariants))
        return None
    if isinstance(exc, InvariantViolation):
        hint = at_step(check.hints.get(exc.invariant, check.generic_hint), final)
    elif isinstance(exc, ImplementationHung):
        return _hang_failure(topic, label, exc, code, impl, final, HANG_HINT)
    elif _hypothesis_flaky(exc):
        hint = check.generic_hint
    else:
        own = at_step(check.hints.get("exception", check.generic_hint), final)
        hint = exception_hint(exc) or own
        return _diagnosed_failure(topic, label, exc, hint, code, impl, final, own)
    return _diagnosed_failure(topic, label, exc, hint, code, impl, final)


def _diagnosed_failure(
    topic: Topic,
    label: str,
    exc: BaseException,
    hint: str,
    code: str,
    impl: Any,
    step: int,
    check_hint: str | None = None,
) -> _Failure:
    """A failure with diagnosis's hint when it earned one, and where the difference starts."""
    shown, where, divergence = _diagnosed(topic, code, impl, exc, step, hint, check_hint)
    printed = shown_at_end(topic, code, impl, exc, step)  # ends in the read that differs
    if exc is not None and not isinstance(exc, Exception):
        return _Failure(label, exc, shown, printed, where, divergence)
    choice = functools.partial(
        _shown_for_hint, topic=topic.name, exc=exc, code=code, check_hint=check_hint
    )
    return _Failure(label, exc, shown, printed, where, divergence, choice)


def _hang_failure(
    topic: Topic, label: str, exc: BaseException, code: str, impl: Any, step: int, hint: str
) -> _Failure:
    """A call that never returned: that is the hint (the evidence is the hang itself), with
    where the difference starts when localisation finds it (never at the cost of the hint)."""
    if isinstance(exc, WallClockCapped):  # no hang: the machine did not run it to its end
        return _Failure(label, exc, BUSY_HINT, code)
    if topic.diagnose is not None or not code:
        return _Failure(label, exc, hint, code)
    try:
        with diagnosis_budget():
            finding = located(topic.name, code, impl, step)
    except (Exception, ImplementationHung) as error:
        _log.warning("localising a %s hang failed: %r", topic.name, error)
        if os.environ.get("SERVELAB_DEBUG") == "1":
            raise
        return _Failure(label, exc, cut_short(hint, error), code)
    return _Failure(label, exc, hint, code, finding.where, finding.divergence)


def _probe_failure(
    probe: Probe, label: str, exc: BaseException, impl: Any, topic: Topic, step: int
) -> _Failure:
    exc, own = check_stopped(exc) or exc, at_step(probe.hint, step)  # as this step reads it
    if isinstance(exc, ProbeFailed):
        hint = at_step(exc.hint, step) if exc.hint else own
        return _diagnosed_failure(topic, label, exc, hint, exc.code, impl, step)
    program = program_in_progress(traceback_of(exc)) or []
    code, about = "\n".join(program), getattr(own, "about", About()).methods
    label = unreached(label, about, exc, program[-1] if program else None)
    if isinstance(exc, ImplementationHung):
        hint = (probe.hang_hint and probe.hang_hint(code)) or HANG_HINT
        return _hang_failure(topic, label, exc, code, impl, step, hint)
    # The exception's hint says what kind of slip it is; the check's name says what the call
    # was meant to do (an entry as large as the budget fits), which the type alone cannot.
    explained = exception_hint(exc)
    hint = f"{explained} (the check that failed: {probe.name})" if explained else own
    return _diagnosed_failure(topic, label, exc, hint, code, impl, step, own)
