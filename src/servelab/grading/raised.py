"""A Python error of the learner's (IndexError, TypeError ...), as a report tells it: its
type, its message, the learner's line that raised it, and what the reference does instead."""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from servelab.grading._learner import exception_meaning, learner_frame
from servelab.grading.localise import Divergence


@dataclass(frozen=True)
class Raised:
    """A Python error (IndexError, KeyError ...) raised by the learner's own code, not one of
    the notebook's errors: its type, its message and the learner's line that raised it."""

    kind: str
    message: str
    function: str
    line: int | None
    source: str
    meaning: str | None = None
    """What an error of this type means (:func:`~servelab.grading._learner.exception_meaning`)."""
    inside: str = ""
    """Where it was raised below the learner's line, in code their line called (a method of
    the class they build on): "`line` in `name`", or empty where their line raised it."""


#: Characters of a learner's error message a hint quotes.
MESSAGE_CHARS = 60
#: Characters of a line below the learner's (in code their line called) a hint quotes.
SOURCE_CHARS = 80


def _bounded_message(exc: BaseException) -> str:
    message = str(exc)
    return message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 3] + "..."


def own_error(exc: BaseException | None) -> Raised | None:
    """The learner's own Python error in ``exc``, or None (no error, one of the notebook's or
    the grader's, or one raised outside the learner's code)."""
    if not isinstance(exc, Exception) or type(exc).__module__ != "builtins":
        return None
    frame = learner_frame(exc)
    if frame is None:
        return None
    message = _bounded_message(exc)
    source = (frame.line or "").strip()
    # a `raise` of the learner's own says what it means in its message, not the type's
    meaning = None if source.startswith("raise") else exception_meaning(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    inner, inside = frames[-1], ""
    if (inner.filename, inner.lineno) != (frame.filename, frame.lineno):
        # a comprehension's frame is named <listcomp>: the function around it is named
        name = next((f.name for f in reversed(frames) if not f.name.startswith("<")), "")
        code = (inner.line or "").strip()
        code = code if len(code) <= SOURCE_CHARS else code[: SOURCE_CHARS - 3] + "..."
        inside = f"`{code}` in `{name}`" if code and name else ""
    kind = type(exc).__name__
    return Raised(kind, message, frame.name, frame.lineno, source, meaning, inside)


def raised_place(d: Divergence, raised: Raised) -> str:
    """What is certain of a learner's own error at the first diverging call: where it was
    raised, from which call (the state is under where:), and what the reference does there.
    No rule and no kind: the fields after a raise show a method cut short, not its rule."""
    said = f"{raised.kind}: {raised.message}" if raised.message else raised.kind
    if raised.meaning:
        said += f" ({raised.meaning})"
    at = f"your {raised.function}()"
    if raised.line:
        at = f"line {raised.line} of {at}"
    if raised.source:
        at = f"`{raised.source}` ({at})"
    if raised.inside:
        at += f", inside the code that line called: {raised.inside}"
    theirs = d.theirs[0]
    for past, now in (("returned", "returns"), ("raised", "raises")):
        if theirs.startswith(past):
            theirs = now + theirs[len(past) :]
    return (
        f"start at your `{d.method}`: on the call under where:, it raised {said} "
        f"at {at}; from the same state the reference {theirs}"
    )


def later_raise(raised: Raised, later: bool = True) -> str:
    """The learner's own error raised after the first difference, in a sentence: where it
    was raised, which the place before it may explain (not ``later``: the first call raised)."""
    said = f"{raised.kind}: {raised.message}" if raised.message else raised.kind
    if raised.meaning:
        said += f" ({raised.meaning})"
    if not raised.function:
        line = f"the last line under reproduce: raised {said}"
    else:
        at = f"line {raised.line} of your {raised.function}()" if raised.line else "your code"
        line = f"on the last line under reproduce:, {at} raised {said}"
    return f"Later, {line}" if later else line[0].upper() + line[1:]


def raised_outside(exc: BaseException | None) -> Raised | None:
    """A Python error raised outside the learner's lines (in a base class's code their call
    reached): what it says, with no line of theirs to point at."""
    if not isinstance(exc, Exception) or type(exc).__module__ != "builtins":
        return None
    message = _bounded_message(exc)
    return Raised(type(exc).__name__, message, "", None, "", exception_meaning(exc))
