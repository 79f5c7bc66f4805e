"""A check that stopped on what the learner's code gave it: told as a failed check, not a crash.

A probe runs the learner's code one line at a time (:class:`~servelab.grading._script.Script`)
and then reads what the line returned or left (``list(got) == want``). When the learner's
method returns ``None`` where the reference returns a list, the check's own ``list(got)``
raises ``TypeError``: no line of the learner's raised it, and the program that led there is in
the script, not in the traceback. Reported as the learner's exception, the report would show
no program and guess a cause from the error's type. Told as what it is, a failed check with
the program so far, localisation replays that program and shows where yours and the
reference part, which is what the learner needs.

Certain: the same check reads the reference's result on the same lines (every probe passes on
the notebook's solution), so what the learner's code returned or left differs from it there.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from servelab.grading._learner import learner_frame, tb_frames
from servelab.grading._script import Script
from servelab.grading.replay import program_of
from servelab.grading.topic import ProbeFailed

__all__ = ["check_stopped"]

_GRADING = Path(__file__).resolve().parent
_CHECK_CODE = (str(_GRADING), str(_GRADING.parent / "testing"))  # the checks, not the classes


def check_stopped(exc: BaseException) -> ProbeFailed | None:
    """``exc`` as the failed check it is, when a probe's own code raised it while reading what
    the learner's last line gave (no learner frame in the traceback, raised in the grader's
    check code, a script with lines in progress); None for any other error."""
    if not isinstance(exc, Exception) or isinstance(exc, AssertionError):
        return None
    if type(exc).__module__ != "builtins" or program_of(exc) or learner_frame(exc) is not None:
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or not str(Path(frames[-1].filename).resolve()).startswith(_CHECK_CODE):
        return None
    script = _script_in_progress(exc)
    if script is None or not script.lines:
        return None
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    message = (
        "the check could not read what the last line under reproduce: gave back or left "
        f"behind ({said}); it reads the reference's after the same lines"
    )
    return script.fail(message)


def _script_in_progress(exc: BaseException) -> Script | None:
    """The innermost probe frame's script: the program that ran up to the check."""
    found = None
    for frame in tb_frames(exc.__traceback__):
        for value in frame.f_locals.values():
            if isinstance(value, Script):
                found = value
    return found
