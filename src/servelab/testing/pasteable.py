"""A reproduce listing that runs when pasted: a call that raised and was expected to.

A probe or a state machine records each call before it runs it. When a call raises and the
check catches the error (a refusal the notebook asks for), the program goes on; written bare,
that line would stop the learner's pasted cell before the line the report is about. Such a
line is written ``with suppress(Kind): call`` instead, ``Kind`` the nearest builtin class of the
error (a notebook's own error is a ``ValueError`` or an ``Exception`` underneath, and every
notebook has those names), with the import once before it.
"""

from __future__ import annotations

import sys

__all__ = ["SUPPRESS_IMPORT", "Caught", "builtin_kind"]

SUPPRESS_IMPORT = "from contextlib import suppress"


def builtin_kind(exc: BaseException) -> str:
    """The nearest builtin class of ``exc``: a name the learner's notebook has."""
    for kind in type(exc).__mro__:
        if kind.__module__ == "builtins":
            return kind.__name__
    return "Exception"  # pragma: no cover - every exception derives from a builtin


class Caught:
    """The last recorded call's error, until the program shows whether it was caught."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.error: BaseException | None = None
        self.at = 0  # the line that raised ``error`` (a note may follow it)

    def raised(self, exc: BaseException) -> None:
        """The last recorded line raised ``exc``."""
        self.error, self.at = exc, len(self.lines) - 1

    def went_on(self) -> None:
        """The program continued after the line that raised: that error was caught (while
        its handler still runs, it may yet be the failure: see :meth:`failed_with`)."""
        if self.error is not None and sys.exc_info()[1] is not self.error:
            self.expected()

    def expected(self) -> None:
        """The error of the line that raised is the refusal the check asked for."""
        if self.error is None:
            return
        kind, self.error = builtin_kind(self.error), None
        line = self.lines[self.at]
        if line.startswith("with suppress("):
            return
        self.lines[self.at] = f"with suppress({kind}): {line}"
        if SUPPRESS_IMPORT not in self.lines:
            self.lines.insert(self.at, SUPPRESS_IMPORT)

    def failed_with(self, failure: BaseException | None) -> None:
        """The program ends with ``failure``: the last line stays bare where it is the
        failure or the error being handled when it was raised, and is settled otherwise."""
        error = self.error
        if error is None:
            return
        related = {id(sys.exc_info()[1])}
        chain = failure
        while chain is not None and id(chain) not in related:
            related.add(id(chain))
            chain = chain.__cause__ or chain.__context__
        if id(error) not in related:
            self.expected()
