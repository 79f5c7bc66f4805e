"""What keeps a report the same from run to run and from machine to machine.

* A folder made under the temporary directory or in memory (a disk tier's, a learner's
  ``mkdtemp``) has a random name: :func:`stable_text` names every such folder the same way.
  An object shown by its default repr (a generator returned where a list belongs) carries its
  memory address: :func:`stable_text` leaves the address out.
* A diagnosis (localisation, the catalogue, the readings and their proofs by replay) is
  budgeted in CPU seconds (:data:`DIAGNOSE_TIMEOUT_S`) and in its own wall time, time spent
  waiting for a CPU left out (:func:`~servelab.testing.core.hang_guard`): on a loaded machine
  it ends as it does on an idle one. Only the last-resort cap of :data:`DIAGNOSE_WALL_CAP_S`
  seconds of wall-clock time ends it otherwise, and then the report says so
  (:func:`cut_short`) instead of passing the check's hint off as the whole diagnosis.
* A check's call stopped by that cap is no hang of the learner's: the report says the machine
  was too busy (:func:`hang_line`, :data:`BUSY_HINT`), not that a loop never ends.
"""

from __future__ import annotations

import io
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout

from servelab.grading.about import Hint
from servelab.testing.core import ImplementationHung, WallClockCapped, hang_guard

__all__ = [
    "BUSY_HINT",
    "DIAGNOSE_TIMEOUT_S",
    "DIAGNOSE_WALL_CAP_S",
    "MEMORY_FOLDER",
    "cut_short",
    "diagnosis_budget",
    "hang_line",
    "stable_text",
]

#: CPU seconds a diagnosis may run (a failing grade's whole budget is 5 s of CPU).
DIAGNOSE_TIMEOUT_S = 5.0
#: Wall-clock seconds after which a diagnosis ends however its time went: the last resort.
DIAGNOSE_WALL_CAP_S = 100.0

#: A file system in memory (Linux), where a grade may make its temporary folders instead.
MEMORY_FOLDER = "/dev/shm"

_ROOTS = "|".join(re.escape(root) for root in (tempfile.gettempdir(), MEMORY_FOLDER))
_TEMPORARY_FOLDER = re.compile(rf"(?:{_ROOTS})[/\\][^/\\\s'\"]+")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")  # the end of a default repr, <... at 0x...>


def stable_text(text: str) -> str:
    """``text`` with every temporary folder named the same way on every run, and no memory
    address in a default repr (a hint keeps what it is about)."""
    if not _TEMPORARY_FOLDER.search(text) and not _ADDRESS.search(text):
        return text
    shown = _ADDRESS.sub("", _TEMPORARY_FOLDER.sub("<temporary folder>", text))
    return Hint(shown, text.about) if isinstance(text, Hint) else shown


@contextmanager
def diagnosis_budget() -> Iterator[None]:
    """Run a diagnosis within its budget, its prints kept out of the report."""
    guard = hang_guard("diagnose", DIAGNOSE_TIMEOUT_S, wall_cap=DIAGNOSE_WALL_CAP_S)
    with guard, redirect_stdout(io.StringIO()):
        yield


def cut_short(hint: str, error: BaseException) -> str:
    """The hint a report shows when diagnosis ended with ``error``: ``hint`` (the check's
    own), with a plain note where the wall-clock cap ended it, not the learner's code."""
    if not isinstance(error, WallClockCapped):
        return hint
    shown = (
        f"{hint} (the machine was too busy to finish diagnosing this failure within "
        f"{error.seconds:g} s of wall-clock time, so this hint is the check's alone: grade "
        "again when the machine is less busy for the full report)"
    )
    return Hint(shown, hint.about) if isinstance(hint, Hint) else shown


#: The hint of a check stopped by the wall-clock cap: nothing shows that the learner's code hangs.
BUSY_HINT = (
    "the machine was too busy to run this check to its end, so nothing here says that your code "
    "hangs: grade again when the machine is less busy"
)


def hang_line(call: str, exc: ImplementationHung) -> str:
    """What the report says of ``call``, which a hang guard stopped with ``exc``."""
    if isinstance(exc, WallClockCapped):
        return (
            f"{call} was stopped after {exc.seconds:g} s of wall-clock time, its own time not "
            "spent: the machine was too busy to finish it"
        )
    return f"{call} did not return within {exc.seconds:g} s"
