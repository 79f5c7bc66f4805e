"""Whether a check's hint speaks of the whole difference found, not only of part of it.

A check's hint fits a call of one of its methods (:class:`~servelab.grading.about.About`);
one that declares fields, a call whose difference touches one of them. But a call can also
differ in what only one side did at all: yours preempted a request, moved a key or dropped a
table where the reference left that field as it was (or the other way round). When another
rule of the same method declares that field and the hint does not, the action is that rule's:
the hint was written for another rule of the method (the number of tokens a request runs,
where the learner's call preempted one too many) and would send the learner to code that keeps
its rule. The place and the difference then stand alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from servelab.grading.about import RESULT, About, Hint
from servelab.grading.registry import load_topic

if TYPE_CHECKING:
    from servelab.grading.localise import Divergence

__all__ = ["covers_actions", "fits_raise", "one_sided", "topic_hints"]


def one_sided(divergence: Divergence | None) -> list[str]:
    """The fields that one of the two calls changed and the other left as it was: an action
    only one side took (no divergence: none)."""
    if divergence is None:
        return []
    before: Mapping[str, Any] = divergence.before
    their_before: Mapping[str, Any] = divergence.their_before or before
    mine: Mapping[str, Any] = divergence.mine[1]
    theirs: Mapping[str, Any] = divergence.theirs[1]
    found = []
    for name in sorted({*mine, *theirs}):
        if mine.get(name) == theirs.get(name):
            continue
        mine_moved = name in mine and mine.get(name) != before.get(name)
        theirs_moved = name in theirs and theirs.get(name) != their_before.get(name)
        if mine_moved != theirs_moved:
            found.append(name)
    return found


def _idle(divergence: Divergence) -> bool:
    """Whether your call returned and changed none of the fields it shows (one that raised did
    something: the raise is its action)."""
    outcome, fields = divergence.mine
    before: Mapping[str, Any] = divergence.before
    returned = outcome.startswith("returned")
    return returned and all(value == before.get(name) for name, value in fields.items())


def covers_actions(about: About, divergence: Divergence | None, topic: str = "") -> bool:
    """Whether a hint is about every action at the call: each field only one side changed
    (:func:`one_sided`) is one of its fields, or one that no other hint of ``topic`` about the
    method found declares (a block list that a preemption empties is its by-product, not
    another rule). A hint that declares no fields is about none of them: where another rule of
    the method declares one, the action is that rule's. A call of yours that returned having
    changed nothing took no action of another rule: every rule of the method is in play. No
    topic, no other hints to weigh. Of hints offered as alternatives, one suffices."""
    if about.alternatives:
        return any(covers_actions(a, divergence, topic) for a in about.alternatives)
    if divergence is None or not topic or _idle(divergence):
        return True
    method = divergence.method
    others = [o for o in topic_hints(topic) if o.about != about and o.about.names_method(method)]
    return not any(
        not about.names_field(name) and any(o.about.names_field(name) for o in others)
        for name in one_sided(divergence)
    )


@cache
def topic_hints(topic: str) -> tuple[Hint, ...]:
    """Every declared hint a check of ``topic`` can show: its probes' and its machines'."""
    found: list[Hint] = []
    for step in load_topic(topic).steps:
        found += [p.hint for p in step.probes if isinstance(p.hint, Hint)]
        if step.machine is not None:
            found += [h for h in step.machine.hints.values() if isinstance(h, Hint)]
    return tuple(dict.fromkeys(found))


def fits_raise(about: About, divergence: Divergence | None) -> bool:
    """Whether a hint declared ``about`` speaks of a call that raised the learner's own
    error: one of its methods is the call's, and it explains a result or declares no field
    (the fields after a raise show a method cut short, not the rule a field hint states)."""
    if about.alternatives:
        return any(fits_raise(a, divergence) for a in about.alternatives)
    if divergence is None or not about.names_method(divergence.method):
        return False
    if about.holds is not None and not about.holds(divergence):
        return False
    return not about.fields or RESULT in about.fields
