"""Diagnosis by matching behaviour: name the known mistake that behaves like the learner's code.

Two different mistakes can break the same invariant, so the invariant alone cannot say which
one was made. When a check fails, the failing program (the paste-able lines of the report) is
replayed on the learner's implementation, on the correct one and on every implementation in
the topic's catalogue of known mistakes (:mod:`servelab.grading.mistakes`). After every line
the replay writes down what a learner could see: the value returned or the kind of error
raised, and the topic's observable state. If exactly one known mistake reproduces the
learner's observations call for call, and the correct implementation does not, the mistake is
named: "your cache behaves exactly like one that evicts the most recently used entry".
Otherwise the hook answers None and the grader keeps the failed invariant's hint.

Programs found by Hypothesis are shrunk to the fewest calls that break a rule, and such a
program often cannot tell two alike mistakes apart (the newest entry and the largest one are the
same entry in it). So a few fixed programs per topic, written to separate alike mistakes, are
replayed too: a mistake stays a candidate only if, wherever it shows in them, the learner's
class shows it the same way. That also keeps a mistake nobody listed from being named after a
known one that merely agrees with it on the failing program.

A topic's hook is ``diagnose(program, impl) -> str | None``; :func:`for_topic` returns it, and
:func:`diagnosed` is the one call the grader makes when a check fails::

    hint = diagnosed(topic.name, code, exc, impl) or hint
A learner's exception inside a probe carries the probe's program so far in ``repro``
(:func:`remember_program`), so it can be diagnosed like any other failure.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from servelab.grading._script import graded_names, renamed
from servelab.grading.about import RESULT, About, Hint
from servelab.grading.certainty import agrees_everywhere
from servelab.grading.ending import shown_at_end
from servelab.grading.graft import _classes as graft_classes
from servelab.grading.graft import _split, graft
from servelab.grading.hidden_reading import placed_reading, slip_reading
from servelab.grading.hint_scope import covers_actions, fits_raise
from servelab.grading.localise import (
    Divergence,
    Localisation,
    Skeleton,
    changed_methods,
    localise,
)
from servelab.grading.mistakes import Mistake, correct_impl, mistakes
from servelab.grading.name_variants import name_variants
from servelab.grading.observe import Canon
from servelab.grading.raised import Raised, later_raise, own_error, raised_outside, raised_place
from servelab.grading.readings import kind
from servelab.grading.readings.contrast import agrees_near, appended, condition, second_results
from servelab.grading.readings.kinds_offset import other_results
from servelab.grading.registry import TOPICS, load_topic
from servelab.grading.replay import (
    Observation,
    TopicReplay,
    program_of,
    remember_program,
    replay,
)
from servelab.grading.where import place_hint, where_lines

__all__ = [
    "Diagnoser",
    "Finding",
    "Observation",
    "TopicReplay",
    "diagnosed",
    "explained",
    "for_topic",
    "later_raise",
    "own_error",
    "program_of",
    "raised_outside",
    "remember_program",
    "replay",
    "where_lines",
    "with_place",
]


#: Variants of each program replayed before a claim of certainty (a count, not seconds).
VARIANTS = 12
#: Variants of the failing program a look-alike must agree on before it is asked about.
QUESTION_VARIANTS = 4
#: Variants of each program replayed in the topic's other configuration
#: (:attr:`~servelab.grading.replay.TopicReplay.configured`).
CONFIGURED_VARIANTS = 3
_NUMBER = re.compile(r"(?<![\w'\".])\d+(?![\w'\".])")


def variants(program: str, count: int) -> list[str]:
    """``count`` copies of ``program`` with its integer literals changed (0 to twice the value
    plus 8), each by a generator seeded with its index: the same variants on every run."""
    return [_NUMBER.sub(_changer(random.Random(i)), program) for i in range(count)]


def _changer(rng: random.Random) -> Callable[[re.Match[str]], str]:
    def change(match: re.Match[str]) -> str:
        value = int(match.group())
        choices = [value, value + 1, max(0, value - 1), rng.randint(0, 2 * value + 8)]
        return str(rng.choice(choices))

    return change


@dataclass(frozen=True)
class Finding:
    """What diagnosis found: a hint (None keeps the check's), the lines that show where the
    difference starts, whether the hint claims certainty, and the localised methods."""

    hint: str | None = None
    where: tuple[str, ...] = ()
    certain: bool = False
    methods: tuple[str, ...] = ()
    place: str | None = None
    """Where to start, naming no cause: put before the check's hint when no hint is earned."""
    rule: str | None = None
    """The rule the first diverging call breaks (:mod:`servelab.grading.readings`): shown in
    place of the check's own hint, which was written for whatever that check targets."""
    divergence: Divergence | None = None
    """The first diverging call, for the report's picture of both states after it."""
    raised: bool = False
    """``place`` says where the learner's own Python error was raised, at the first diverging
    call: a check's hint follows it only where its declaration fits that call."""


class Diagnoser:
    """The hook of one topic: ``Diagnoser(topic)(program, impl) -> str | None``."""

    def __init__(self, topic: str, spec: TopicReplay) -> None:
        if spec.fields is None:
            raise ValueError(f"topic {topic!r}: a replayed topic declares its observable fields")
        self.topic = topic
        self.spec = spec
        subject = spec.subject
        self.skeleton = Skeleton(
            subject,
            spec.namespace,
            lambda program, impl: replay(program, spec, impl),
            spec.fields,
            lambda obj: spec.observe({subject: obj}, Canon()),
            frozenset(spec.ungraded),
            spec.detail,
        )

    def usual_names(self, program: str, impl: Any) -> str:
        """``program`` as a report shows it for ``impl`` (the learner's class names), written
        with the topic's usual names, which every replay binds to the class it replays."""
        learners = graded_names(self.spec, impl)
        return renamed(program, {mine: usual for usual, mine in learners.items()})

    def matches(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None = None
    ) -> list[Mistake]:
        """The known mistakes whose replay of ``program`` equals ``impl``'s; empty when the
        correct implementation's replay equals it too (the program cannot tell them apart).
        ``catalogue`` replaces the topic's (to measure how an unknown mistake is treated)."""
        return self._matches(self.usual_names(program, impl), impl, catalogue)[0]

    def _matches(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None
    ) -> tuple[list[Mistake], list[Mistake]]:
        """(the matches, allowing a mistake to behave correctly on a separating program; the
        matches that equal the learner on every separating program)."""
        learner = replay(program, self.spec, impl)
        if replay(program, self.spec, correct_impl(self.topic)) == learner:
            return [], []
        known = mistakes(self.topic) if catalogue is None else catalogue
        found = [m for m in known if replay(program, self.spec, m.impl) == learner]
        strict = list(found)
        for extra in self.spec.separating:
            if not found:
                break
            theirs = replay(extra, self.spec, impl)
            right = replay(extra, self.spec, correct_impl(self.topic))
            seen = {m.name: replay(extra, self.spec, m.impl) for m in found}
            found = [m for m in found if seen[m.name] in (theirs, right)]
            strict = [m for m in strict if seen.get(m.name) == theirs]
        return found, strict

    def _shows_apart(self, impl: Any, other: Any) -> bool:
        """``other`` shows its mistake on a separating program, and ``impl`` shows it the same
        way there: agreeing only where both behave correctly proves nothing about the slip."""
        right = correct_impl(self.topic)
        for text in self.spec.separating:
            theirs = replay(text, self.spec, other)
            if theirs != replay(text, self.spec, right) and theirs == replay(text, self.spec, impl):
                return True
        return False

    def _alike_on_variants(self, program: str, impl: Any, other: Any) -> bool:
        """``impl`` and ``other`` agree on :data:`VARIANTS` variants of the failing and the
        separating programs, each with its numbers changed (a fixed, seeded choice), and on
        each with its key names exchanged (:mod:`~servelab.grading.name_variants`): an
        independent signal before a claim of certainty; then in the topic's second
        configuration (:meth:`_alike_configured`)."""
        for text in (program, *self.spec.separating):
            for variant in (*variants(text, VARIANTS), *name_variants(text)):
                if replay(variant, self.spec, impl) != replay(variant, self.spec, other):
                    return False
        return self._alike_configured(program, impl, other)

    def _alike_configured(self, program: str, impl: Any, other: Any) -> bool:
        """``impl`` and ``other`` agree on the failing and the separating programs, and on
        :data:`CONFIGURED_VARIANTS` variants of each, in the topic's other configuration
        (:attr:`~servelab.grading.replay.TopicReplay.configured`), where every value the
        programs take from outside their text differs from every other: two slips that
        differ only in a factor equal to another in the usual one are told apart there."""
        configured = self.spec.configured
        if configured is None:
            return True
        mine, theirs = configured(impl), configured(other)
        for text in (program, *self.spec.separating):
            for variant in (text, *variants(text, CONFIGURED_VARIANTS)):
                if replay(variant, self.spec, mine) != replay(variant, self.spec, theirs):
                    return False
        return True

    def localised(
        self, program: str, impl: Any, step: int | None = None, deeper: bool = False
    ) -> Localisation:
        """Where ``impl`` starts to differ from the checkpoint of ``step`` (the last: None);
        ``deeper``: reading the topic's hidden fields too (:mod:`.hidden_reading`)."""
        from servelab.checkpoints import checkpoint

        reference = correct_impl(self.topic) if step is None else checkpoint(self.topic, step)
        program = self.usual_names(program, impl)
        skeleton = self.skeleton
        more = self.spec.hidden_fields
        if deeper and more is not None:
            skeleton = dataclasses.replace(skeleton, fields=more, detail=more)
        first = program.lstrip().split("=", 1)[0].strip()
        if self.spec.subject_per_program and first.isidentifier() and first != skeleton.subject:
            skeleton = dataclasses.replace(skeleton, subject=first)
        return localise(skeleton, program, impl, reference)

    def explain(
        self,
        program: str,
        impl: Any,
        step: int | None = None,
        catalogue: Sequence[Mistake] | None = None,
        read: bool = True,
        raised: Raised | None = None,
    ) -> Finding:
        """Where the difference starts, and a known mistake only as far as it is earned:
        "behaves exactly like one that ..." when the mistake agrees with the learner on the
        failing program and on every separating program, shows itself on one of those as the
        learner's class does, and changes the localised method; a
        question when it only shares the symptom; nothing otherwise. ``raised``: the learner's
        own Python error the program ended with; raised at the first diverging call, it is
        what the place says (:func:`raised_place`) unless a reading written for that raise
        states its rule."""
        if not program.strip():
            return Finding()
        program = self.usual_names(program, impl)  # as the report shows it, or already usual
        place = self.localised(program, impl, step)
        found, strict = self._matches(program, impl, catalogue)
        methods = set(place.methods)
        correct = correct_impl(self.topic)

        def at_place(m: Mistake) -> bool:
            return bool(methods & changed_methods(m.impl, correct))

        where = where_lines(place, self.skeleton.fields)
        if (
            len(strict) == 1
            and methods
            and at_place(strict[0])
            and self._alike_on_variants(program, impl, strict[0].impl)
            and self._shows_apart(impl, strict[0].impl)
            and agrees_everywhere(self.spec, program, impl, strict[0].impl)
        ):
            hint = f"your {self.spec.noun} behaves exactly like one that {strict[0].like}"
            return Finding(hint, where, True, place.methods, divergence=place.divergence)
        if methods:
            found = [m for m in found if at_place(m)]
        if place.divergence is not None:
            found = [m for m in found if self._alike_at_call(place.divergence, m)]
        if len(found) == 1 and not self._alike_on_numbers(program, impl, found[0].impl):
            found = []  # the symptom is shared on this program's numbers only
        hidden_in = place.methods[0] if len(place.methods) == 1 else None
        rule = (
            placed_reading(self, program, impl, step, place, hidden_in)
            if read
            else slip_reading(self.spec, place, program)
        )
        d = place.divergence
        if (
            not read  # a slip's reading at the call that raised, then where it was raised
            and rule is not None
            and raised is not None
            and d is not None
            and d.mine[0] == f"raised {raised.kind}"
        ):
            said = raised_place(d, raised).removeprefix(f"start at your `{d.method}`: ")
            rule = f"{rule}. {said[:1].upper()}{said[1:]}"
            start = appended(f"start at your `{d.method}`: {rule}", self._condition(place))
            return Finding(None, where, False, place.methods, start, rule, d, raised=True)
        if (
            rule is None  # a reading written for this raise states its rule; else the facts
            and raised is not None
            and d is not None
            and d.mine[0] == f"raised {raised.kind}"
        ):
            placed = appended(raised_place(d, raised), self._condition(place))
            asked = None
            if len(found) == 1:
                asked = (
                    f"{placed}. The same symptom comes from a {self.spec.noun} that "
                    f"{found[0].like}: does yours do that?"
                )
            return Finding(asked, where, False, place.methods, placed, None, d, raised=True)
        start = None
        if rule is not None and (place.divergence is not None or hidden_in is not None):
            method = place.divergence.method if place.divergence is not None else hidden_in
            start = appended(f"start at your `{method}`: {rule}", self._condition(place))
        if len(found) == 1:
            hint = (
                f"the same symptom comes from a {self.spec.noun} that {found[0].like}: does "
                "yours do that?"
            )
            if start is not None:
                hint = f"{start}. The {hint[len('the ') :]}"
            return Finding(hint, where, False, place.methods, start, rule, place.divergence)
        if start is not None:
            return Finding(None, where, False, place.methods, start, rule, place.divergence)
        start = appended(self._place(place), self._condition(place))
        return Finding(None, where, False, place.methods, start, None, place.divergence)

    def _alike_on_numbers(self, program: str, impl: Any, other: Any) -> bool:
        """``impl`` and ``other`` agree on :data:`QUESTION_VARIANTS` variants of the failing
        program with its numbers changed: a look-alike asked about shares the symptom beyond
        one choice of sizes and limits (one admitted over the limit and one that ignores the
        limit agree only where the queue holds one request more than the limit)."""
        for variant in variants(program, QUESTION_VARIANTS):
            if replay(variant, self.spec, impl) != replay(variant, self.spec, other):
                return False
        return True

    def _alike_at_call(self, d: Divergence, m: Mistake) -> bool:
        """A look-alike is asked about only where the method it changes is the one found and,
        put in the learner's class, it behaves as the learner's does at and next to the
        diverging call (:func:`agrees_near`)."""
        if d.method not in changed_methods(m.impl, correct_impl(self.topic)):
            return False
        prefix, name = _split(d.method)
        try:
            other = graft(type(d.subject), graft_classes(m.impl)[prefix], [name])
        except Exception:  # no such class, or one that cannot be layered: no evidence
            return False
        return agrees_near(self.skeleton, d, other)

    def _condition(self, place: Localisation) -> str | None:
        """When yours and the reference part, from calls next to the first diverging one."""
        return condition(self.skeleton, place.divergence)

    def _place(self, place: Localisation) -> str | None:
        """Where to start, with the kind of difference the first diverging call shows (a
        factor of the block size only once a second state shows it again)."""
        start = place_hint(place)
        d = place.divergence
        if start is None or d is None:
            return start
        seen = kind(
            d,
            lambda: second_results(self.skeleton, d),
            self.skeleton.fields,
            lambda: other_results(self.skeleton, d),
        )
        if seen is None:
            return start
        return f"start at your `{d.method}`: {seen}"

    def __call__(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None = None
    ) -> str | None:
        return self.explain(program, impl, None, catalogue).hint


# ----------------------------------------------------------------------------- the topics


@cache
def specs() -> dict[str, TopicReplay]:
    """How each topic with a catalogue is replayed, as its module declares
    (:attr:`~servelab.grading.topic.Topic.replay`). Loaded on first use: a grade cell that
    passes imports no topic but its own."""
    found = {}
    for name in TOPICS:
        spec = load_topic(name).replay
        if spec is not None:
            found[name] = spec
    return found


@cache
def topic_hook(name: str) -> Diagnoser | None:
    """The diagnosis hook of topic ``name``, or None for a topic without a catalogue. Loads
    that topic alone: diagnosing a weight cache must not import the capstone's torch."""
    if name not in TOPICS:
        return None
    spec = load_topic(name).replay
    return Diagnoser(name, spec) if spec is not None else None


@cache
def hooks() -> dict[str, Diagnoser]:
    """The diagnosis hook of every topic with a catalogue (loads every topic)."""
    return {name: found for name in TOPICS if (found := topic_hook(name)) is not None}


def __getattr__(name: str) -> Any:
    """``SPECS`` and ``HOOKS``: :func:`specs` and :func:`hooks` as module constants."""
    if name == "SPECS":
        return specs()
    if name == "HOOKS":
        return hooks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def for_topic(name: str) -> Callable[[str, Any], str | None] | None:
    """The diagnosis hook of topic ``name``, or None for a topic without a catalogue."""
    return topic_hook(name)


def explained(
    topic: str,
    code: str,
    exc: BaseException | None,
    impl: Any,
    step: int | None = None,
    catalogue: Sequence[Mistake] | None = None,
) -> Finding:
    """The grader's call site: where the difference starts, and a hint when one is earned.

    ``code`` is the failing check's repro (may be empty); ``exc`` the exception it ended with,
    whose attached program stands in when a learner's error cut a probe short. Errors inside
    diagnosis propagate: the grader decides what to do with them. ``catalogue`` replaces the
    topic's (the catalogue's measure leaves the mistake itself out), so the measure reads the
    same finding as the report.
    """
    hook = topic_hook(topic)
    program = code or (program_of(exc) if exc is not None else "")
    if hook is None or not program:
        return Finding()
    read, raised = not _slip(exc), own_error(exc)
    finding = hook.explain(program, impl, step, catalogue, read=read, raised=raised)
    if finding.where or finding.hint or not code or step is None:
        return finding
    # the check saw a difference its program's replay does not (a free list's order, which
    # only a later read shows): the program as printed, ending in that read, is diagnosed
    ended = shown_at_end(load_topic(topic), code, impl, exc, step)
    if ended == code:
        return finding
    return hook.explain(ended, impl, step, catalogue, read=read, raised=raised)


def located(topic: str, code: str, impl: Any, step: int | None = None) -> Finding:
    """Where the difference starts, and nothing more: for a call that never returned, whose
    hint is the hang itself, and whose every replay runs to the end of its line budget (so the
    catalogue's replays and their variants would cost seconds for nothing shown)."""
    hook = topic_hook(topic)
    if hook is None or not code:
        return Finding()
    place = hook.localised(code, impl, step)
    where = where_lines(place, hook.skeleton.fields)
    return Finding(None, where, False, place.methods, divergence=place.divergence)


#: Errors that say the code itself slipped (a typo, a call with the wrong arguments, a
#: ``next()`` past the end): their own hint says more than the rule of the method found.
SLIPS = frozenset(
    {
        "AttributeError",
        "IndexError",
        "NameError",
        "RecursionError",
        "StopIteration",
        "TypeError",
        "UnboundLocalError",
        "ZeroDivisionError",
    }
)


def _slip(exc: BaseException | None) -> bool:
    return exc is not None and any(c.__name__ in SLIPS for c in type(exc).__mro__)


#: The hint shown where no method could be found and the check's own hint is about
#: something the check did not see.
NO_PLACE = (
    "no one method of yours could be found to differ: the last line under reproduce: shows "
    "what the check expected and what yours did"
)
#: The hint shown where a method was found by its graft alone and the check's own hint is
#: about another method.
GRAFTED_ONLY = (
    "start at your `{method}` (see where:); no single call of it differs where the check "
    "looks, so compare what it leaves behind for the later lines under reproduce:"
)


def grafted_raise(finding: Finding, exc: BaseException | None) -> str | None:
    """A Python error raised outside the learner's lines (in the class they build on) after
    one method found by its graft alone: that place, then the error as it was raised. The
    error type's usual cause ("a typo") would speak of the line that raised, which is not
    theirs; what their method left behind is what the later line tripped on."""
    if finding.place or finding.divergence is not None or len(finding.methods) != 1:
        return None
    if own_error(exc) is not None:
        return None
    outside = raised_outside(exc)
    if outside is None:
        return None
    method = finding.methods[0].rpartition(".")[2]
    later = later_raise(outside)
    return (
        f"start at your `{method}` (see where:); no single call of it differs where the check "
        f"looks, so compare what it leaves behind: {later[0].lower()}{later[1:]}"
    )


_FIELD_READ = re.compile(r"^\s*(\w+)\.(\w+)\s*(#.*)?$")
_LEN_READ = re.compile(r"^\s*len\((\w+)\)\s*(#.*)?$")
_CALL = re.compile(r"^\s*(?:\w+\s*=\s*)?(\w+)\.(\w+)\(")


def observed(code: str) -> tuple[str | None, str | None]:
    """What the failing check saw, from the last line of its program: (the method whose
    result it read, the field it read); (None, None) when the line shows neither."""
    lines = [line for line in code.splitlines() if line.strip()]
    if not lines:
        return None, None
    last = lines[-1]
    if _LEN_READ.match(last):
        return None, "len"
    if m := _FIELD_READ.match(last):
        return None, m.group(2)
    if m := _CALL.match(last):
        return m.group(2), None
    return None, None


def fits_observed(about: About, code: str) -> bool:
    """Whether a hint declared ``about`` speaks of what the check saw (:func:`observed`): the
    field it read is one of its fields, or the method whose result it read is one of its
    methods and it explains a result (or declares no field)."""
    if about.alternatives:
        return any(fits_observed(a, code) for a in about.alternatives)
    method, name = observed(code)
    if name is not None:
        return about.names_field(name)
    if method is not None:
        named = any(m.rpartition(".")[2] == method for m in about.methods)
        return named and (not about.fields or RESULT in about.fields)
    return False


def _about_others(about: About, methods: Sequence[str]) -> bool:
    """Whether a hint names methods and none of them is one of ``methods`` (found by their
    graft): what the check saw may be its subject, yet the cause it states is in code the
    graft proved right."""
    if about.alternatives:
        return all(_about_others(a, methods) for a in about.alternatives)
    return bool(about.methods) and not any(about.names_method(m) for m in methods)


def _rule_fits(about: About, finding: Finding, topic: str = "") -> bool:
    """Whether a hint fits the place found (:meth:`About.fits`) and, where it names the methods
    whose rule it states, the call found is one of them: a field of the hint changed by
    another method (a ``get`` that adds a pin) is an extra amount from that method, whose
    rule the hint does not state, while the hint's own methods may keep theirs."""
    if about.alternatives:
        return any(_rule_fits(a, finding, topic) for a in about.alternatives)
    if not about.fits(finding.methods, finding.divergence):
        return False
    if not covers_actions(about, finding.divergence, topic):  # another rule's action
        return False
    if finding.divergence is None or not about.methods or not finding.methods:
        return True
    own = {m.rpartition(".")[2] for m in about.methods}  # "LFU.update_on_put" or bare
    return any(m.rpartition(".")[2] in own for m in finding.methods)


def with_place(
    finding: Finding,
    check_hint: str,
    gate: bool = True,
    code: str = "",
    searched: bool = True,
    topic: str = "",
) -> str:
    """The hint a report shows: the one diagnosis earned; else where to start, then the
    check's own hint as what the check was written for, but only when that hint's declared
    :class:`~servelab.grading.about.About` fits the evidence: the method found is one of its
    methods, or the first diverging call returned the same as the reference's and differs
    only in its fields. A hint written for another rule would send the learner to code that
    is right: the place and the difference then stand alone, and so they do after a hint that
    declares nothing. With ``gate`` off (a hint about the learner's own exception, which is
    the evidence itself) the check's hint always follows the place, except after the place
    of the learner's own Python error (:attr:`Finding.raised`), whose type alone names no
    cause: there a hint follows only where its declaration fits the call. Where no method
    was found, a declared hint stands only where it speaks of what the check saw in the last
    line of ``code`` (:func:`fits_observed`): one about another method says nothing of it;
    after a method found by its graft alone, only where it names no other method than that.
    ``searched`` off (the topic localises nothing: the engine, the invariant checker) keeps
    the check's hint, the only evidence there is."""
    if finding.hint:
        return finding.hint
    if finding.rule and finding.place:
        return finding.place
    if finding.place:
        stop = "" if finding.place.endswith("?") else "."
        about = check_hint.about if isinstance(check_hint, Hint) else None
        if finding.raised:  # the error's place: a hint shown only where it fits the call
            fits = about is not None and fits_raise(about, finding.divergence)
        else:
            fits = about is not None and _rule_fits(about, finding, topic)
        if fits or not (gate or finding.raised):
            return f"{finding.place}{stop} This check was written for: {check_hint}"
        return finding.place
    if gate and searched and not finding.methods and isinstance(check_hint, Hint):
        # no place: the hint only where it speaks of what the check saw
        return check_hint if fits_observed(check_hint.about, code) else NO_PLACE
    if gate and searched and finding.methods and isinstance(check_hint, Hint):
        # a method found by its graft alone (no call of it differs where the check looks):
        # the hint only where it is about that method or what the check saw
        about = check_hint.about
        if about.fits(finding.methods, finding.divergence) or (
            fits_observed(about, code) and not _about_others(about, finding.methods)
        ):
            return check_hint
        return GRAFTED_ONLY.format(method=finding.methods[0].rpartition(".")[2])
    return check_hint


def diagnosed(topic: str, code: str, exc: BaseException | None, impl: Any) -> str | None:
    """The named mistake for a failed check, or None.

    ``code`` is the failing check's repro (may be empty); ``exc`` the exception it ended with,
    whose attached program stands in when a learner's error cut a probe short. Diagnosis
    never fails a grade of its own accord: any error inside it means no diagnosis.
    """
    hook = topic_hook(topic)
    program = code or (program_of(exc) if exc is not None else "")
    if hook is None or not program:
        return None
    try:
        return hook(program, impl)
    except Exception:
        return None
