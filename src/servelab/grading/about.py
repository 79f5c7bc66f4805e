"""What a check's hint is about: the skeleton methods and observable fields it speaks of.

A check's hint describes the mistake the check was written for. Once diagnosis has found the
method where the learner's code starts to differ, that hint helps only if it is about the same
thing; otherwise it sends the learner to code that is right. So every hint declares, next to
its text, the methods it is about and the fields whose change it explains, and the report
shows it after the place only when the evidence agrees (:func:`About.fits`). Declared, not
guessed from the hint's wording: a hint that happens to name a method in passing is not about
it, and one that says "the count" is about ``counts`` all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servelab.grading.localise import Divergence

__all__ = ["RESULT", "About", "Hint", "at_step", "either"]

RESULT = "result"
"""The field name a hint declares when it explains what a call returns or raises (a wrong
value, an error raised or not): the outcome of the call, not a field of the object."""


@dataclass(frozen=True)
class About:
    """The skeleton methods a hint is about (``"unpin"``, or ``"SIEVE.pop_victim"`` for one
    class of a topic with several) and the observable fields whose change it explains
    (``"pins"``, ``"out.preempted"``). Both empty: a hint about no one place (never shown
    after a place, which says more)."""

    methods: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    """Fields of which one must hold an entry before the first diverging call for the hint's
    cause to be possible at all (``"reclaim order"`` for a hint about a reclaimed block): a
    hint about reuse says nothing of a program that reclaimed nothing."""
    alternatives: tuple[About, ...] = field(default=(), compare=False, repr=False)
    """The hints' own Abouts, for hints offered as alternatives (:func:`either`): the pair
    fits where one of them fits, never by one's method with the other's fields."""
    holds: Callable[[Divergence | None], bool] | None = field(
        default=None, compare=False, repr=False
    )
    """Whether the hint is true of the first diverging call, where its fields alone cannot
    tell: for a method whose call only returns a number, proved by calling the learner's
    method again (a hint about the latency term, where the latency term agrees, is about code
    that is right); for a rule of how much a call does, that it did the thing at all (a rule
    of how many entries a put evicts says nothing of a put that stored nothing). None: no
    such proof is asked."""

    def __post_init__(self) -> None:
        named = (("methods", self.methods), ("fields", self.fields), ("needs", self.needs))
        for name, values in named:
            if not isinstance(values, tuple) or not all(isinstance(v, str) and v for v in values):
                raise TypeError(f"About.{name} must be a tuple of names, got {values!r}")

    def names_method(self, found: str) -> bool:
        """Whether ``found`` (a method as localisation names it, maybe ``"LFU.pop_victim"``)
        is one of this hint's methods, by its full name or by its own name."""
        bare = found.rpartition(".")[2]
        return any(m in (found, bare) for m in self.methods)

    def names_field(self, found: str) -> bool:
        """Whether ``found`` (a field as a report names it: ``"pins"``, ``"cpu.pins"`` for one
        tier of a hierarchy, ``"out.preempted"``) is one of this hint's fields, by its full
        name or by its last part."""
        return any(f in (found, found.rpartition(".")[2]) for f in self.fields)

    def fits(self, methods: Iterable[str], divergence: Divergence | None) -> bool:
        """Whether the hint is about what the evidence shows: one of the ``methods`` found is
        among its methods, or the first diverging call returned the same as the reference's
        and every field that differs after it is one of its fields. Either way, a hint that
        declares fields is about those: when the first diverging call's difference (its
        :data:`RESULT` and the fields that differ after it) touches none of them, the hint
        was written for another rule of the same method, and does not fit."""
        if self.alternatives:
            return any(a.fits(methods, divergence) for a in self.alternatives)
        if self.needs and not _holds_one(self.needs, divergence):
            return False
        if self.holds is not None and not self.holds(divergence):
            return False
        touched = _touched(divergence)
        if self.fields and touched and not any(self.names_field(k) for k in touched):
            return False
        if any(self.names_method(m) for m in methods):
            return True
        if not touched or RESULT in touched:
            return False
        return all(self.names_field(k) for k in touched)

    def __or__(self, other: About) -> About:
        """Both hints' methods and fields (a hint that offers two explanations), fitting
        where one of the two fits."""
        return About(
            tuple(dict.fromkeys((*self.methods, *other.methods))),
            tuple(dict.fromkeys((*self.fields, *other.fields))),
            tuple(dict.fromkeys((*self.needs, *other.needs))) if self.needs and other.needs else (),
            (*(self.alternatives or (self,)), *(other.alternatives or (other,))),
        )


def _holds_one(needs: tuple[str, ...], divergence: Divergence | None) -> bool:
    """Whether one of the ``needs`` fields held an entry before the first diverging call (no
    divergence: no evidence that it did)."""
    if divergence is None:
        return False
    before: Mapping[str, Any] = divergence.before
    return any(bool(before.get(name)) for name in needs)


def _touched(divergence: Divergence | None) -> list[str]:
    """What the first diverging call changed differently: :data:`RESULT` when its outcome
    differs, then each field that differs after it (none without a divergence)."""
    if divergence is None:
        return []
    mine: Mapping[str, Any] = divergence.mine[1]
    theirs: Mapping[str, Any] = divergence.theirs[1]
    differing = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k))
    return [RESULT, *differing] if divergence.mine[0] != divergence.theirs[0] else differing


class Hint(str):
    """A check's hint: its text (it is a ``str``, shown as it is) and what it is about."""

    about: About
    earlier: tuple[tuple[int, str], ...]
    """``(step, text)`` pairs, by step: the text the grade of a step before ``step`` shows
    (:func:`at_step`), where the hint's own text states a rule that step teaches later."""

    def __new__(cls, text: str, about: About, earlier: tuple[tuple[int, str], ...] = ()) -> Hint:
        if not isinstance(about, About):
            raise TypeError(f"a hint declares what it is about as an About, got {about!r}")
        hint = super().__new__(cls, text)
        hint.about = about
        hint.earlier = tuple(sorted(earlier))
        return hint

    def before(self, step: int, text: str) -> Hint:
        """This hint, shown as ``text`` by the grade of any step before ``step``: a check that
        an early step runs too must not tell a learner a rule of a step not reached yet
        (preempt the newest, in the report of a step that only admits)."""
        return Hint(str(self), self.about, (*self.earlier, (step, text)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Hint, (str(self), self.about, self.earlier))


def at_step(hint: str, step: int | None) -> str:
    """What ``hint`` says in the grade of ``step`` (None: the last): its text for the first
    later step it is scoped :meth:`~Hint.before`, or its own text where none is."""
    for first, text in getattr(hint, "earlier", ()):
        if step is not None and step < first:
            return Hint(text, getattr(hint, "about", About()))
    return hint


def either(*hints: Hint) -> Hint:
    """Several hints offered as alternatives ("... Or: ..."), about everything each is about."""
    if not hints:
        raise ValueError("either() needs at least one hint")
    about = hints[0].about
    for hint in hints[1:]:
        about = about | hint.about
    return Hint(" Or: ".join(hints), about)
