"""The first diverging call, as a reading sees it, and the rules every topic shares."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from servelab.grading.about import RESULT
from servelab.grading.observe import Unreadable
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = [
    "BOTH_RAISED",
    "MINE_RAISED",
    "RESULT",
    "SAME",
    "THEIRS_RAISED",
    "VALUE",
    "Difference",
    "Reader",
    "WrittenFor",
    "call",
    "failed_call",
    "other_error",
    "read_on_one_side",
    "returned_none",
    "unreadable",
    "written_for",
]

SAME = "same"
"""Both calls returned the same value: only fields differ."""
VALUE = "value"
"""Both returned, other values."""
MINE_RAISED = "mine raised"
"""Yours raised where the reference returned."""
THEIRS_RAISED = "theirs raised"
"""The reference raised where yours returned."""
BOTH_RAISED = "both raised"
"""Both raised (of the same class or not)."""
RETURNED = (SAME, VALUE)
"""Both returned, the same value or not."""


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
    second: Callable[[], tuple[Any, Any, Any] | None] | None = field(
        default=None, compare=False, repr=False
    )
    """The same call from a second state (the program built with another number): the
    values yours and the reference return there and the block size there, or None when no
    second state parts them; for a relation the numbers of one call cannot settle (a factor
    that happens to equal the block size)."""
    fields: Callable[[Any], Mapping[str, Any]] | None = field(
        default=None, compare=False, repr=False
    )
    """The topic's fields of an object, by name, as a learner reads them (the names of
    ``before``, ``mine`` and ``theirs``): to read one of them on a copy while a probe runs."""
    others: Callable[[], list[tuple[Any, Any]]] | None = field(
        default=None, compare=False, repr=False
    )
    """The same method called with other arguments on copies of the state: the values yours
    and the reference return (:func:`~servelab.grading.readings.kinds_offset.other_results`),
    to tell an offset of the method's own from a by-product of one call."""
    reference: type | None = field(default=None, compare=False, repr=False)
    """The learner's class with the method taken from the checkpoint
    (:attr:`~servelab.grading.localise.Divergence.reference_class`): ``subject`` with this
    class runs the reference's method on a copy, to prove which rule holds at this step."""
    impl: Any = field(default=None, compare=False, repr=False)
    """The learner's class, for a hidden difference (no call, no fields): a reading may replay
    ``program`` on it to find the call the fields do not show."""

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

    @property
    def outcome_pair(self) -> str:
        """The outcome pair: :data:`SAME`, :data:`VALUE`, :data:`MINE_RAISED`,
        :data:`THEIRS_RAISED` or :data:`BOTH_RAISED`."""
        if self.i_raised:
            return BOTH_RAISED if self.they_raised else MINE_RAISED
        if self.they_raised:
            return THEIRS_RAISED
        return SAME if self.same_outcome else VALUE

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


@dataclass(frozen=True)
class WrittenFor:
    """The difference a reading was written for, declared beside it: the outcome pairs it
    speaks of, the fields whose difference it explains, and which way those it says are too
    high (``above``: yours left it above the reference's) or too low (``below``) went.

    :meth:`show` lets the reading through only when the observed difference is that one:
    its outcome pair is declared, every field that differs is explained, and each field (or
    :data:`RESULT`) named in ``above`` / ``below`` that differs went that way. Otherwise the
    observed difference holds something the reading does not explain, and its rule may not be
    the one broken: the report keeps the place and the difference, which say nothing false.
    """

    outcomes: tuple[str, ...]
    fields: tuple[str, ...] = ()
    above: tuple[str, ...] = ()
    below: tuple[str, ...] = ()

    def fits(self, d: Difference) -> bool:
        if d.outcome_pair not in self.outcomes:
            return False
        explained = {*self.fields, *self.above, *self.below}
        # a tier's field (``cpu.pins``) is explained by its own name (``pins``)
        if not all(n in explained or n.rpartition(".")[2] in explained for n in d.differ):
            return False
        ways = [(name, 1) for name in self.above] + [(name, -1) for name in self.below]
        return all(_way(d, name) in (0, sign) for name, sign in ways)

    def show(self, d: Difference, text: str | None) -> str | None:
        """``text`` when the observed difference is the one this reading was written for."""
        return text if text is not None and self.fits(d) else None


def read_on_one_side(d: Difference, name: str) -> bool:
    """Whether field ``name`` could be read after one side's call and not after the other's:
    what it holds on the unreadable side is unknown, so a reading that only names what
    differs cannot name it as a value left unlike the reference's."""
    return isinstance(d.mine.get(name), Unreadable) != isinstance(d.theirs.get(name), Unreadable)


def written_for(*fields: str, outcomes: tuple[str, ...] = RETURNED) -> WrittenFor:
    """A :class:`WrittenFor` that explains ``fields`` (both calls returned, unless ``outcomes``
    says otherwise) and checks no direction: a reading that needs one checks it where it reads."""
    return WrittenFor(outcomes, fields)


def _way(d: Difference, name: str) -> int | None:
    """+1 when yours left ``name`` above the reference's, -1 below, 0 when it does not
    differ, None when it differs in no one direction (not numbers, or some keys each way).
    A mapping of numbers compares key by key (an absent key counts 0); a list or a set by how
    many entries it holds (the same number, other entries: no one direction)."""
    if name == RESULT:
        mine, theirs = _number(d.returned("mine")), _number(d.returned("theirs"))
        if d.my_outcome == d.their_outcome:
            return 0
        return None if mine is None or theirs is None else _sign(mine - theirs)
    a, b = d.mine.get(name), d.theirs.get(name)
    if a == b:
        return 0
    if _is_int(a) and _is_int(b):
        return _sign(a - b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        signs = set()
        for key in {*a, *b}:
            x, y = a.get(key, 0), b.get(key, 0)
            if not (_is_int(x) and _is_int(y)):
                return None
            if x != y:
                signs.add(_sign(x - y))
        return signs.pop() if len(signs) == 1 else None
    if isinstance(a, list | tuple | set | frozenset) and isinstance(
        b, list | tuple | set | frozenset
    ):
        return _sign(len(a) - len(b)) or None
    return None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(shown: str | None) -> int | None:
    try:
        return int(shown) if shown is not None else None
    except ValueError:
        return None


def _sign(n: int) -> int:
    return (n > 0) - (n < 0)


def call(subject: Any, name: str, *args: Any) -> Any:
    """``subject.name(*args)`` on a copy's skeleton API, or None when that fails."""
    try:
        return getattr(subject, name)(*args)
    except Exception:
        return None


Reader = Callable[[Difference], "str | None"]


def failed_call(d: Difference) -> str | None:
    """Both raised, yours changed something on the way and the reference's changed nothing:
    strong exception safety. Where the reference's raising call leaves something behind too
    (a disk tier's temporary file), the rule is not that one, and nothing is said."""
    if not (d.i_raised and d.they_raised and d.differ) or d.changed("theirs"):
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


NONE_IS_AN_ANSWER = frozenset({"put", "_choose_victims"})
"""Methods whose reference answers None on purpose where it cannot do what was asked (a tier's
put that finds no room is a miss): None from yours is an answer there, not a path that forgot
to return, and the topic's reading tells it."""


def returned_none(d: Difference) -> str | None:
    """Yours returned None where the reference returns a list, tuple, set or dict, and nothing
    else differs: a path of the method gives no result. Certain of any topic's method, whatever
    its rule (a topic reading about the value would read None as a value: "found no hits"),
    but a method whose None is one of its answers (:data:`NONE_IS_AN_ANSWER`)."""
    if d.hidden or d.differ or d.returned("mine") != "None" or d.method in NONE_IS_AN_ANSWER:
        return None
    theirs = d.returned("theirs")
    if theirs is None or not theirs.startswith(("[", "(", "{")):
        return None  # a method may answer None on purpose (no victim): only a collection's
        # None is certain to be a result that was not returned
    return (
        f"yours returned None where the reference returns {theirs}: every path of "
        f"`{d.method}` must return its result (a path that ends without `return`, or "
        "returns a name still None, gives None)"
    )


def unreadable(d: Difference) -> str | None:
    """A field that could not be read after the call (reading it raised) on one side: said as
    that, with the other side's value. No reading reads an entry of it (the marker is not a
    value), and nothing guesses what it holds or why. A side whose call raised is told by its
    error (a ``__len__`` that raises leaves ``len`` unreadable too)."""
    for name in sorted(d.differ):
        mine, theirs = d.mine.get(name), d.theirs.get(name)
        if isinstance(mine, Unreadable) and not isinstance(theirs, Unreadable) and not d.i_raised:
            return (
                f"after the call, reading your `{name}` raised {mine[1]}, where the "
                f"reference's reads {theirs!r}: compare what your call puts there with what "
                "the reference's does"
            )
        if isinstance(theirs, Unreadable) and not d.they_raised:
            return (
                f"after the reference's call from the state under where:, reading `{name}` "
                f"raised {theirs[1]}; after yours it reads {mine!r}"
            )
    return None
