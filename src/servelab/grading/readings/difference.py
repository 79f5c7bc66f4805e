"""The first diverging call, as a reading sees it, and the rules every topic shares."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["Difference", "Reader", "call", "failed_call", "other_error"]


@dataclass(frozen=True)
class Difference:
    """The first diverging call, as a reading sees it."""

    method: str
    """The method's own name (``pop_victim``), without a policy prefix."""
    policy: str
    """``"LFU"`` or ``"SIEVE"`` for a policy; empty otherwise."""
    args: tuple[Any, ...]
    before: Mapping[str, Any]
    mine: Mapping[str, Any]
    theirs: Mapping[str, Any]
    my_outcome: str
    their_outcome: str
    subject: Any
    program: str = ""
    """The failing program, for a fact about what came before the call (a key pinned once)."""
    hidden: bool = False
    """The method's graft fixes the program, yet no call of it shows a difference in any field
    a learner sees: what differs is what it keeps inside for later (a heap, an order of
    release). No call, no fields: a reader states that method's rule about it, or nothing."""

    def probe(self, method: str, *args: Any) -> tuple[str, Any]:
        """Your ``method`` called on a fresh copy of the object as it was before the call:
        ("returned", value) or ("raised", error name); ("failed", None) when it cannot run."""
        try:
            obj = copy.deepcopy(self.subject)
            with line_budget(LINES_PER_CALL):
                return ("returned", getattr(obj, method)(*args))
        except Exception as exc:
            return ("raised", type(exc).__name__)
        except OutOfLines:
            return ("failed", None)

    def after(self, *args: Any) -> Any:
        """A copy of the object as yours leaves it after the call (with ``args``, or the
        call's own), to read what it keeps that no field shows; None when it cannot run."""
        try:
            obj = copy.deepcopy(self.subject)
            with line_budget(LINES_PER_CALL):
                getattr(obj, self.method)(*(args or self.args))
        except Exception:
            return None
        except OutOfLines:
            return None
        return obj

    @property
    def differ(self) -> frozenset[str]:
        """The fields whose value after the call differs between yours and the reference."""
        names = set(self.mine) | set(self.theirs)
        return frozenset(n for n in names if self.mine.get(n) != self.theirs.get(n))

    @property
    def i_raised(self) -> bool:
        return self.my_outcome.startswith("raised")

    @property
    def they_raised(self) -> bool:
        return self.their_outcome.startswith("raised")

    @property
    def same_outcome(self) -> bool:
        return self.my_outcome == self.their_outcome

    def returned(self, side: str) -> Any:
        """The value a side returned, as shown (``"'a'"``), or None when it raised."""
        outcome = self.my_outcome if side == "mine" else self.their_outcome
        return outcome[len("returned ") :] if outcome.startswith("returned ") else None

    def error(self, side: str) -> str:
        outcome = self.my_outcome if side == "mine" else self.their_outcome
        return outcome[len("raised ") :] if outcome.startswith("raised ") else ""

    def changed(self, side: str) -> bool:
        """Whether a side's call changed any field at all."""
        after = self.mine if side == "mine" else self.theirs
        return dict(after) != dict(self.before)

    def grew(self, name: str) -> bool:
        """Whether yours left field ``name`` (a number) above the reference's."""
        a, b = self.mine.get(name), self.theirs.get(name)
        return isinstance(a, int) and isinstance(b, int) and a > b

    def shrank(self, name: str) -> bool:
        a, b = self.mine.get(name), self.theirs.get(name)
        return isinstance(a, int) and isinstance(b, int) and a < b


def call(subject: Any, name: str, *args: Any) -> Any:
    """``subject.name(*args)`` on a copy's skeleton API, or None when that fails."""
    try:
        return getattr(subject, name)(*args)
    except Exception:
        return None


Reader = Callable[[Difference], "str | None"]


def failed_call(d: Difference) -> str | None:
    """Both raised, and yours changed something on the way: strong exception safety."""
    if not (d.i_raised and d.they_raised and d.differ):
        return None
    fields = ", ".join(sorted(d.differ))
    return (
        f"yours raised {d.error('mine')} but changed {fields} first: a call that raises "
        "changes nothing, so check everything before you record anything"
    )


def other_error(d: Difference) -> str | None:
    """Both raised, nothing else differs, and the errors are of other classes: the case is
    seen, and the error a caller catches is not the one raised (an ``IndexError`` from an
    empty heap where the notebook's ``NoVictim`` belongs)."""
    mine, theirs = d.error("mine"), d.error("theirs")
    if not (d.i_raised and d.they_raised) or d.differ or not mine or not theirs or mine == theirs:
        return None
    return (
        f"yours raised {mine} where the reference raises {theirs}: test for this case "
        f"yourself and raise {theirs}, before the line that raises {mine}"
    )
