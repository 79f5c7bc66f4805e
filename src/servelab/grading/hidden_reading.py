"""The rule broken by the one method whose graft fixes a failing program though no call of it
differs in the fields localisation compares: read from its first call that differs once the
topic's hidden fields are compared too (a pin that moved its key in SIEVE's queue), or from
the program run on the learner's own class by the topic's hidden reader (an LFU tick that
went back after a thousand calls, where copying the state at each call costs too much).

Those fields stay out of the usual comparison: there they would move the first diverging
call of other mistakes, and the known mistakes named by it, to another place. Only the
reading comes from here; the report's place and difference stay the usual ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.grading.localise import Localisation
from servelab.grading.mistakes import correct_impl
from servelab.grading.readings import reading
from servelab.grading.replay import TopicReplay

__all__ = ["placed_reading", "slip_reading"]


def placed_reading(
    diagnoser: Any,
    program: str,
    impl: Any,
    step: int | None,
    place: Localisation,
    hidden_in: str | None,
) -> str | None:
    """The rule the first diverging call of ``place`` breaks, as the topic's reader reads it;
    where no call differs and one method ``hidden_in`` was found by its graft, first what
    :func:`hidden_reading` reads (``diagnoser``: the topic's
    :class:`~servelab.grading.diagnose.Diagnoser`)."""
    spec: TopicReplay = diagnoser.spec
    if place.divergence is None and hidden_in is not None:
        said = hidden_reading(
            spec,
            lambda: diagnoser.localised(program, impl, step, deeper=True),
            program,
            impl,
            step,
            diagnoser.topic,
            hidden_in,
        )
        if said is not None:
            return said
    return reading(spec.reader, place.divergence, program, hidden_in, impl)


def hidden_reading(
    spec: TopicReplay,
    deeper: Callable[[], Localisation],
    program: str,
    impl: Any,
    step: int | None,
    topic: str,
    method: str,
) -> str | None:
    """The rule ``method`` breaks, or None: ``deeper`` localises ``program`` again with
    :attr:`TopicReplay.hidden_fields`; its first diverging call is read only when it is a
    call of ``method``. Else :attr:`TopicReplay.hidden_reader` reads the program on ``impl``
    beside the checkpoint of ``step`` (the last: None)."""
    said = None
    if spec.hidden_fields is not None:
        d = deeper().divergence
        if d is not None and d.method == method:
            said = reading(spec.reader, d, program)
    if said is None and spec.hidden_reader is not None:
        from servelab.checkpoints import checkpoint

        reference = correct_impl(topic) if step is None else checkpoint(topic, step)
        try:
            said = spec.hidden_reader(program, impl, reference, method)
        except Exception:  # a learner's object read in an unexpected shape: no reading
            said = None
    return said


def slip_reading(spec: TopicReplay, place: Localisation, program: str) -> str | None:
    """The rule the first diverging call of ``place`` breaks, where the program ended in the
    learner's own Python error: read only by the topic's :attr:`TopicReplay.slip_reader`."""
    if spec.slip_reader is None or place.divergence is None:
        return None
    return reading(spec.slip_reader, place.divergence, program)
