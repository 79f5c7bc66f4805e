"""Reading a difference as the rule it breaks: the hint for a mistake nobody listed.

Localisation (:mod:`servelab.grading.localise`) finds the first call into the learner's method
whose outcome differs from the checkpoint's, from the same state and arguments. What differs
(which fields, which way, what was returned or raised) says which rule of that method broke,
whatever the code behind it: ``_evict`` leaving ``used`` where the reference lowers it breaks
"subtract the victim's size", in any implementation. A reading states what yours did there and
the rule, in the notebook's words. It is written for one method and one kind of difference and
shown only when that method differs that way, never as a guess from which check failed.

Each reading declares, beside its text, the difference it was written for
(:class:`~servelab.grading.readings.difference.WrittenFor`): the outcome pairs it speaks of
(both returned the same, other values, yours raised, the reference raised, both raised), the
fields whose difference it explains, and which way those it says are too high or too low went.
A dispatch branch picks the reading; the declaration lets it through only when the observed
difference is that one. A field it does not explain, the other direction, or another outcome
pair means the call shows something else, and the reading's rule may not be the one broken:
nothing is shown, and the report keeps the place, the difference and its kind.

A reading describes the observed call and states a rule; it claims no cause ("behaves exactly
like one that ..." stays the catalogue's, and only when earned). Where no reading fits, the
report keeps pointing at the place (:func:`servelab.grading.where.place_hint`), with the
kind of difference the call shows where it has one (:func:`kind`: off by one, a unit's factor,
an order, an entry missing or put elsewhere).

Each topic's reader lives in this package, one module per topic, and is named by the topic's
:class:`~servelab.grading.replay.TopicReplay` (``reader``) in its own module.
"""

from collections.abc import Callable, Mapping
from typing import Any

from servelab.grading.localise import Divergence
from servelab.grading.readings.difference import (
    Difference,
    Reader,
    returned_none,
    unreadable,
)
from servelab.grading.readings.kept_answer import kept_answer
from servelab.grading.readings.kinds import kind_reading
from servelab.testing.aliasing import returned_own

__all__ = ["Difference", "Reader", "kind", "reading"]


def _difference(
    divergence: Divergence,
    program: str,
    second: Callable[[], tuple[Any, Any, Any] | None] | None = None,
    fields: Callable[[Any], Mapping[str, Any]] | None = None,
    others: Callable[[], list[tuple[Any, Any]]] | None = None,
) -> Difference:
    policy, _, method = divergence.method.rpartition(".")
    return Difference(
        method,
        policy,
        divergence.args,
        divergence.before,
        divergence.mine[1],
        divergence.theirs[1],
        divergence.mine[0],
        divergence.theirs[0],
        divergence.subject,
        program,
        second=second,
        fields=fields,
        others=others,
        reference=divergence.reference_class,
    )


def reading(
    reader: Reader | None,
    divergence: Divergence | None,
    program: str = "",
    hidden_in: str | None = None,
    impl: Any = None,
) -> str | None:
    """The rule ``divergence`` breaks, in words, or None when ``reader`` (a topic's, declared in
    its :class:`~servelab.grading.replay.TopicReplay`; None: the topic has none) finds none that
    fits; ``program`` is the failing program the divergence was found in. Without a
    divergence, ``hidden_in`` names the one method whose graft fixes the program though no
    call of it differs where a learner sees (:attr:`Difference.hidden`); ``impl``, the
    learner's class, lets its reading replay the program (:attr:`Difference.impl`)."""
    if reader is None:
        return None
    if divergence is None or divergence.unkeyed:  # no call differs in the state's key
        named = hidden_in if divergence is None else divergence.method
        if named is None:
            return None
        policy, _, method = named.rpartition(".")
        own = returned_own(program, method)
        if own is not None:  # the check proved it: the returned object is the structure's
            return own
        hidden = Difference(method, policy, (), {}, {}, {}, "", "", None, program, True, impl=impl)
        try:
            said = reader(hidden)
        except Exception:
            said = None
        if divergence is None or said:
            return said
    d = _difference(divergence, program)
    try:
        return returned_none(d) or kept_answer(d) or reader(d)
    except Exception:  # a learner's object read in an unexpected shape: no reading
        return None


def kind(
    divergence: Divergence | None,
    second: Callable[[], tuple[Any, Any, Any] | None] | None = None,
    fields: Callable[[Any], Mapping[str, Any]] | None = None,
    others: Callable[[], list[tuple[Any, Any]]] | None = None,
) -> str | None:
    """What kind of difference ``divergence`` shows (off by one, a unit's factor, an entry
    missing, ...), whatever the topic, or None. Unlike a reading it states no rule of the
    method: the report keeps the check's own hint beside it. ``second``: the same call from
    a second state (:attr:`Difference.second`), to confirm a factor one state cannot;
    ``fields``: the topic's fields of an object (:attr:`Difference.fields`), to prove a
    change counted twice; ``others``: other calls of the method (:attr:`Difference.others`),
    to prove an off by one the method's own."""
    if divergence is None:
        return None
    try:
        d = _difference(divergence, "", second, fields, others)
        return unreadable(d) or kind_reading(d)
    except Exception:  # a learner's object read in an unexpected shape: no kind
        return None
