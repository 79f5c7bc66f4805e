"""The exceptions a grade ends with, in a module of their own.

Kept apart from :mod:`servelab.grading.core` so that code the grader itself uses (the pictures'
"not written yet" labels in :mod:`servelab.unwritten`) can tell a grade's report from a learner's
error without importing the grader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.grading.core import Report

__all__ = ["GradeFailure", "GradeInterrupted", "StepNotWritten"]


class GradeFailure(AssertionError):
    """Raised by :func:`grade` when a check fails; the message is the whole report.

    The report has already been printed, so in IPython the traceback is a single line
    (``_render_traceback_``): no grader frames, no second copy of the report.
    """

    def __init__(self, report: Report) -> None:
        super().__init__(report.text)
        self.report = report

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self.report.summary}"]


class GradeInterrupted(KeyboardInterrupt):
    """Raised by :func:`grade` on a real Ctrl-C (Jupyter's stop button): nothing was graded.

    A KeyboardInterrupt still, so whatever stops on Ctrl-C stops; in IPython its traceback is
    one line (``_render_traceback_``), without the grader's frames.
    """

    def __init__(self, topic: str, step: int | None) -> None:
        where = f" step {step}" if step is not None else ""
        super().__init__(f"{topic}{where}: grade interrupted; nothing was graded")

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class StepNotWritten(GradeFailure, NotImplementedError):
    """Raised by :func:`grade` when a method of the graded steps still raises NotImplementedError.

    Also a ``NotImplementedError``: an unfinished step, not a wrong one.
    """
