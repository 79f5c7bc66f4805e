"""The known-buggy implementations, from the catalogue the grader diagnoses with.

They live in :mod:`servelab.grading.mistakes` (one folder per topic), so the grader can replay
a failing program on them; the tests use the same catalogue.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from servelab.grading import GradeFailure, Report, Topic, core, grade
from servelab.grading.diagnose import Finding, diagnosed, program_of
from servelab.grading.mistakes import Mistake, correct_impl, correct_module, mistakes, topic_dir

__all__ = [
    "Mistake",
    "correct_impl",
    "correct_module",
    "diagnosed_hint",
    "failing_check",
    "failing_report",
    "mistakes",
    "shown_hint",
    "topic_dir",
]


@contextmanager
def _last_failure(seen: list[BaseException]) -> Iterator[None]:
    """Remember the exception behind a failing check (the report keeps only its text)."""
    run_probe, run_machine = core._run_probe, core._run_machine

    def probe(*args: Any) -> Any:
        exc = run_probe(*args)
        if exc is not None:
            seen.append(exc)
        return exc

    def machine(*args: Any) -> Any:
        exc, code = run_machine(*args)
        if exc is not None:
            seen.append(exc)
        return exc, code

    core._run_probe, core._run_machine = probe, machine  # type: ignore[assignment]
    try:
        yield
    finally:
        core._run_probe, core._run_machine = run_probe, run_machine  # type: ignore[assignment]


def failing_check(
    topic: str | Topic, impl: Any, step: int | None = None
) -> tuple[Report, str, BaseException | None]:
    """Grade ``impl``, which must fail; return the report, the program that failed (the
    repro, or the program a learner's exception carries) and the failing check's exception."""
    seen: list[BaseException] = []
    with _last_failure(seen):
        try:
            grade(topic, impl, step, out=io.StringIO(), quiet=True)
        except GradeFailure as failure:
            report = failure.report
        else:
            raise AssertionError(f"{impl!r} passed")
    exc = seen[-1] if seen else None
    return report, report.code or (program_of(exc) if exc is not None else ""), exc


def failing_report(topic: str | Topic, impl: Any, step: int | None = None) -> tuple[Report, str]:
    """Grade ``impl``, which must fail; return the report and the program that failed (the
    repro, or the program a learner's exception carries)."""
    report, program, _ = failing_check(topic, impl, step)
    return report, program


def shown_hint(finding: Finding, undiagnosed: Report) -> str:
    """The hint the grader shows for ``finding``, given the report of the same grade without
    diagnosis: the report's own choice (:attr:`Report.choice`), so the catalogue's measure and
    the grader cannot drift apart; a failure that shows its hint whatever is found (a call
    that never returned: the hang is the evidence) keeps it."""
    if undiagnosed.choice is None:
        return undiagnosed.hint
    return undiagnosed.choice(finding, undiagnosed.hint)


def diagnosed_hint(topic: str, impl: Any, step: int | None = None) -> tuple[Report, str]:
    """The hint a learner reads once diagnosis has run: the named mistake, or the check's."""
    report, program = failing_report(topic, impl, step)
    return report, diagnosed(topic, program, None, impl) or report.hint
