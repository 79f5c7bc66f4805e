"""Every check's hint declares what it is about, and the report follows that declaration.

A check's hint is shown after the place diagnosis found only when its declared
:class:`~servelab.grading.about.About` fits the evidence: the method found is one of its
methods, or the first diverging call returned the same as the reference's and differs only in
its fields. These tests walk every topic's hints (each declares an about, naming only methods
of the topic's skeleton and fields the topic observes) and check the rule on reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from buggy_impls import failing_check, failing_report, shown_hint
from servelab.checkpoints import checkpoint
from servelab.grading.about import RESULT, About, Hint, either
from servelab.grading.diagnose import HOOKS, NO_PLACE, Finding, with_place
from servelab.grading.localise import Divergence, _is_step_output, _out_fields, skeleton_methods
from servelab.grading.mistakes import correct_impl, mistakes
from servelab.grading.registry import TOPICS, load_topic
from servelab.grading.topic import ProbeFailed, Topic
from servelab.testing.core import InvariantViolation

PLACE = "start at your `unpin`: on the call under where:, it changes the state differently"
WRITTEN_FOR = "This check was written for:"


def _hints(topic: Topic) -> Iterator[tuple[str, object]]:
    """Every hint a check of ``topic`` can show: its probes', its machines' (one per broken
    rule, and the fallback) and the hints a probe names by rule (the module's ``HINTS``)."""
    for step in topic.steps:
        for probe in step.probes:
            yield f"step {step.number} probe {probe.name!r}", probe.hint
        if step.machine is not None:
            for rule, hint in step.machine.hints.items():
                yield f"step {step.number} machine rule {rule!r}", hint
            yield f"step {step.number} machine fallback", step.machine.generic_hint
    module = __import__(f"servelab.grading.{topic.name.replace('-', '_')}", fromlist=["_"])
    for table in ("HINTS", "PROBE_HINTS"):
        for key, hint in getattr(module, table, {}).items():
            yield f"{table}[{key!r}]", hint


def _declared(name: str) -> list[tuple[str, Hint]]:
    found = []
    for where, hint in _hints(load_topic(name)):
        assert isinstance(hint, Hint), f"{name} {where}: a hint without an about: {hint!r}"
        found.append((where, hint))
    return found


@pytest.mark.parametrize("name", TOPICS)
def test_every_hint_declares_what_it_is_about(name: str) -> None:
    hints = _declared(name)
    assert hints
    # a hint about no one place is allowed, but it is the exception
    assert sum(bool(h.about.methods or h.about.fields) for _, h in hints) > len(hints) / 2


def _methods(name: str) -> set[str]:
    """The methods a hint of topic ``name`` may name: its skeleton's (the learner's and the
    ready-made ones), qualified by class where the topic has several, and bare."""
    topic = load_topic(name)
    if name == "invariant-checker":
        return {"check_invariants"}  # the graded object is one function
    if name == "paged-kernel":
        return {"load_block", "attend", "paged_decode_kernel"}  # one jitted function a step
    if name == "engine":
        module = __import__("servelab.checkpoints.engine", fromlist=["_"])
        classes = [module.ServingEngine, module.BlockManager, module.Scheduler]
        return {n for c in classes for n in dir(c) if callable(getattr(c, n, None))}
    reference = checkpoint(name, topic.steps[-1].number)
    qualified = {*skeleton_methods(reference), *skeleton_methods(reference, True)}
    return qualified | {m.rpartition(".")[2] for m in qualified}


def _observed(name: str) -> set[str]:
    """The fields topic ``name`` observes, as a report names them, read from the objects its
    separating programs build on the correct implementation (and every ``out`` argument's
    fields), each by its full name and by its last part."""
    spec = load_topic(name).replay
    assert spec is not None and spec.fields is not None
    seen: set[str] = set()
    impl = correct_impl(name)
    for program in spec.separating:
        ns = spec.namespace(impl)
        for line in program.splitlines():
            with contextlib.suppress(Exception):
                exec(line.strip().removeprefix("with suppress(Exception): "), ns)
        for value in ns.values():
            if isinstance(value, type) or callable(value):
                continue
            if _is_step_output(value):  # an ``out`` argument, named as a report names it
                seen.update(_out_fields((value,), {}))
                continue
            with contextlib.suppress(Exception):
                seen.update(spec.fields(value))
    return seen | {f.rpartition(".")[2] for f in seen}


@pytest.mark.parametrize("name", TOPICS)
def test_a_hint_names_only_the_skeleton_s_methods_and_the_observed_fields(name: str) -> None:
    methods = _methods(name)
    replayed = load_topic(name).replay is not None
    fields = _observed(name) if replayed else set()
    for where, hint in _declared(name):
        unknown = set(hint.about.methods) - methods
        assert not unknown, f"{name} {where}: no such method in the skeleton: {unknown}"
        if replayed:
            unseen = set(hint.about.fields) - fields - {RESULT}  # a call's outcome, no field
            assert not unseen, f"{name} {where}: not a field the topic observes: {unseen}"
        else:
            assert not hint.about.fields, f"{name} {where}: this topic observes no fields"


def test_an_about_is_a_tuple_of_names_and_a_hint_needs_one() -> None:
    with pytest.raises(TypeError, match="tuple of names"):
        About("unpin")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tuple of names"):
        About(("unpin", ""))
    with pytest.raises(TypeError, match="About"):
        Hint("count the pins", ("pins",))  # type: ignore[arg-type]
    both = either(Hint("a", About(("pin",), ("pins",))), Hint("b", About(("unpin",))))
    assert both == "a Or: b"
    assert both.about == About(("pin", "unpin"), ("pins",))


def _call(mine: dict[str, Any], theirs: dict[str, Any], returned: str = "returned 1") -> Divergence:
    before = {"resident": ["a"], "pins": {"a": 1}, "used": 10}
    return Divergence(
        "unpin", "cache.unpin('a')", before, (returned, mine), ("returned 1", theirs), 0
    )


def test_a_hint_about_the_method_found_follows_the_place() -> None:
    finding = Finding(place=PLACE, methods=("unpin",))
    own = Hint("unpin() without a matching pin() must raise", About(("unpin",)))
    assert with_place(finding, own) == f"{PLACE}. {WRITTEN_FOR} {own}"
    # its prose names no method: the declaration decides, not the wording
    quiet = Hint("pins are counts, not a set", About(("pin", "unpin")))
    assert with_place(finding, quiet) == f"{PLACE}. {WRITTEN_FOR} {quiet}"
    # a method of one class of a topic with several, named by its own name
    policy = Finding(place=PLACE, methods=("SIEVE.pop_victim",))
    assert WRITTEN_FOR in with_place(policy, Hint("the hand", About(("pop_victim",))))
    assert WRITTEN_FOR in with_place(policy, Hint("the hand", About(("SIEVE.pop_victim",))))
    assert with_place(policy, Hint("the tie", About(("LFU.pop_victim",)))) == PLACE


def test_a_hint_about_another_method_is_left_out_whatever_its_prose_names() -> None:
    finding = Finding(place=PLACE, methods=("unpin",))
    # its prose names `unpin()` in passing, but the hint is about the eviction loop
    other = Hint("a victim is evicted in put, never on unpin()", About(("put",)))
    assert with_place(finding, other) == PLACE
    assert with_place(finding, Hint("compare the calls", About())) == PLACE
    # nothing localised: the check's hint stands alone only where it is about what the check
    # saw (the last line of its program), else no hint of another method's
    assert with_place(Finding(), other) == NO_PLACE
    assert with_place(Finding(), other, code="cache.unpin('a')") == NO_PLACE
    assert with_place(Finding(), other, code="cache.put('a', 1)") == other
    # a hint about the learner's own exception is the evidence itself: always shown
    assert with_place(finding, "a KeyError", gate=False) == f"{PLACE}. {WRITTEN_FOR} a KeyError"
    assert with_place(finding, "undeclared text") == PLACE


def test_a_hint_about_the_only_fields_that_differ_follows_the_place() -> None:
    pins = Hint("pins are counts", About((), ("pins",)))
    only_pins = _call({"pins": {}}, {"pins": {"a": 2}})
    finding = Finding(place=PLACE, methods=("unpin",), divergence=only_pins)
    assert WRITTEN_FOR in with_place(finding, pins)
    # a hint that names its methods states their rule: the same field changed by another
    # method (a get that adds a pin) is an extra amount from there, not the hint's rule
    pin_rule = Hint("pins are counts", About(("pin",), ("pins",)))
    assert with_place(finding, pin_rule) == PLACE
    assert WRITTEN_FOR in with_place(dataclasses.replace(finding, methods=("pin",)), pin_rule)
    qualified = Hint("pins are counts", About(("LFU.pin",), ("pins",)))
    assert WRITTEN_FOR in with_place(dataclasses.replace(finding, methods=("pin",)), qualified)
    # another field differs too, or the results differ: the hint may be about something else
    both = _call({"pins": {}, "used": 0}, {"pins": {"a": 2}, "used": 10})
    assert with_place(dataclasses.replace(finding, divergence=both), pins) == PLACE
    results = _call({"pins": {}}, {"pins": {"a": 2}}, "raised ValueError")
    assert with_place(dataclasses.replace(finding, divergence=results), pins) == PLACE
    # a tier's field is named by its tier (cpu.pins): the hint's "pins" covers it
    tiered = _call({"cpu.pins": {}}, {"cpu.pins": {"a": 1}})
    assert WRITTEN_FOR in with_place(dataclasses.replace(finding, divergence=tiered), pins)


def test_a_hint_about_other_fields_of_the_method_found_is_left_out() -> None:
    """The method matches, but the hint explains fields the first diverging call left as the
    reference's: it was written for another rule of the same method."""
    finding = Finding(place=PLACE, methods=("unpin",))
    pins = Hint("unpin takes one pin away", About(("unpin",), ("pins",)))
    used = Hint("release the bytes of an unpinned entry", About(("unpin",), ("used",)))
    only_pins = dataclasses.replace(finding, divergence=_call({"pins": {}}, {"pins": {"a": 2}}))
    assert WRITTEN_FOR in with_place(only_pins, pins)
    assert with_place(only_pins, used) == PLACE
    # one of its fields among those that differ is enough: the rule broke there too
    both = _call({"pins": {}, "used": 0}, {"pins": {"a": 2}, "used": 10})
    assert WRITTEN_FOR in with_place(dataclasses.replace(finding, divergence=both), used)
    # a hint that declares no fields is about the whole method
    anything = Hint("look at unpin", About(("unpin",)))
    assert WRITTEN_FOR in with_place(only_pins, anything)


def test_a_hint_that_needs_a_field_follows_the_place_only_where_it_held_an_entry() -> None:
    """A hint about a reused block says nothing of a program with no block to reclaim."""
    reuse = Hint("did a reclaimed block keep its hash?", About(("_alloc",), (), ("reclaim order",)))

    def at(order: list[int]) -> Finding:
        before = {"reclaim order": order, "hashed": [0]}
        d = Divergence(
            "_alloc",
            "bm._alloc()",
            before,
            ("returned 1", {"hashed": [0, 1]}),
            ("returned 1", {"hashed": [0]}),
            0,
        )
        return Finding(place=PLACE, methods=("_alloc",), divergence=d)

    assert with_place(at([]), reuse) == PLACE
    assert WRITTEN_FOR in with_place(at([3]), reuse)
    assert with_place(Finding(place=PLACE, methods=("_alloc",)), reuse) == PLACE
    # offered beside a hint that needs nothing, the pair needs nothing
    plain = Hint("b", About(("_alloc",)))
    assert either(reuse, plain).about.needs == ()
    assert either(reuse, reuse).about.needs == ("reclaim order",)
    with pytest.raises(TypeError, match="tuple of names"):
        About(("_alloc",), (), "reclaim order")  # type: ignore[arg-type]


def test_a_call_that_differs_only_in_its_result_shows_a_hint_about_results() -> None:
    """Only the value returned (or the error raised) differs: a hint about fields is about
    another rule, one that declares :data:`RESULT` is about this one."""
    raised = _call({"pins": {"a": 1}}, {"pins": {"a": 1}}, "raised KeyError")
    finding = Finding(place=PLACE, methods=("unpin",), divergence=raised)
    pins = Hint("pins are counts", About(("unpin",), ("pins",)))
    error = Hint("an unmatched unpin raises ValueError", About(("unpin",), ("pins", RESULT)))
    assert with_place(finding, pins) == PLACE
    assert with_place(finding, error) == f"{PLACE}. {WRITTEN_FOR} {error}"
    assert WRITTEN_FOR in with_place(finding, Hint("look at unpin", About(("unpin",))))
    # a result is no field of the object: a hint about another method does not fit it
    elsewhere = Hint("raise ValueError", About(("pin",), (RESULT,)))
    assert with_place(finding, elsewhere) == PLACE
    # the result differs and a field the hint names differs too: it fits
    both = _call({"pins": {}}, {"pins": {"a": 1}}, "raised KeyError")
    assert WRITTEN_FOR in with_place(dataclasses.replace(finding, divergence=both), pins)


# ----------------------------------------------------------------- on the catalogue's reports

#: Per topic, a catalogue mistake whose report (with that mistake left out of the catalogue,
#: as for a mistake nobody listed) finds a method its failing check's hint is not about, and
#: the hint of the check that failed; or, where every check that fails in the topic is about
#: the method found, the hint of another rule (named).
NOT_ABOUT = {
    "weight-cache": ("evict_newest", None),
    "eviction-policy": ("sieve_no_wrap", None),
    "block-manager": ("freed_twice", "cow-release-before-allocate"),
    "scheduler": ("admit_before_decode", None),
    "prefix-cache": ("release_cached_to_free", None),
    "kv-offload": ("fifo_refreshes", "decide-first"),
    "token-budget": ("last_chunk_no_sample", None),
}

#: Per topic, a catalogue mistake whose failing check's hint is about the method found.
ABOUT = {
    "weight-cache": "miss_instead_of_raise",
    "eviction-policy": "lfu_hit_no_count",
    "block-manager": "free_ignores_refcount",
    "scheduler": "skip_ahead",
    "prefix-cache": "chain_partial_block",
    "kv-offload": "fifo_refreshes",
    "token-budget": "ignores_cap",
}


def _left_out(topic: str, name: str, read: bool) -> tuple[Finding, Any]:
    """The finding for catalogue mistake ``name`` with it left out of the catalogue (read:
    with the reading of the first diverging call, as the grader shows it; without, so the
    check's hint is all that can follow the place), and the undiagnosed report."""
    mistake = next(m for m in mistakes(topic) if m.name == name)
    undiagnosed = dataclasses.replace(load_topic(topic), diagnose=lambda program, impl: None)
    report, program = failing_report(undiagnosed, mistake.impl)
    others = [m for m in mistakes(topic) if m.name != name]
    return HOOKS[topic].explain(program, mistake.impl, None, others, read=read), report


def _module_hints(topic: str) -> dict[str, Hint]:
    module = __import__(f"servelab.grading.{topic.replace('-', '_')}", fromlist=["_"])
    hints: dict[str, Hint] = module.HINTS
    return hints


@pytest.mark.parametrize("topic", sorted(NOT_ABOUT))
def test_a_check_hint_about_another_method_is_not_shown(topic: str) -> None:
    name, other = NOT_ABOUT[topic]
    for read in (False, True):
        finding, report = _left_out(topic, name, read)
        if other is not None:
            report = dataclasses.replace(report, hint=_module_hints(topic)[other])
        hint = report.hint
        assert isinstance(hint, Hint)
        assert finding.methods and not any(hint.about.names_method(m) for m in finding.methods)
        said = shown_hint(finding, report)
        assert WRITTEN_FOR not in said and str(hint) not in said, (read, said)
        if not read:
            assert finding.place is not None and said.startswith(finding.place), said


@pytest.mark.parametrize("topic", sorted(ABOUT))
def test_a_check_hint_about_the_method_found_is_shown(topic: str) -> None:
    finding, report = _left_out(topic, ABOUT[topic], read=False)
    hint = report.hint
    assert isinstance(hint, Hint)
    assert any(hint.about.names_method(m) for m in finding.methods), (finding.methods, hint)
    assert shown_hint(finding, report) == f"{finding.place}. {WRITTEN_FOR} {hint}"


def _failing_rule(topic: Topic, report: Any, exc: BaseException | None) -> Hint | None:
    """The hint of the rule the failing check broke, read from the check and its exception
    (not from the report): a probe's own hint or the one its failure names, or the machine's
    hint for the invariant that broke. None for a learner's own exception (its hint is about
    that exception, not a rule)."""
    for step in topic.steps:
        for probe in step.probes:
            if f"✗ step {step.number} · {probe.name}" in report.text:
                if isinstance(exc, ProbeFailed):
                    hint = exc.hint or probe.hint
                    return hint if isinstance(hint, Hint) else None
                return None
    machine = topic.steps[-1].machine
    if machine is not None and isinstance(exc, InvariantViolation):
        return machine.hints.get(exc.invariant, machine.generic_hint)
    return None


def _written_for_hints(name: str) -> int:
    """Check every catalogue mistake of topic ``name``, left out as for a mistake nobody
    listed; return how many of their reports show a check's hint after the place."""
    topic = load_topic(name)
    undiagnosed = dataclasses.replace(topic, diagnose=lambda program, impl: None)
    hints = [h for _, h in _declared(name)]
    shown = 0
    for mistake in mistakes(name):
        report, program, exc = failing_check(undiagnosed, mistake.impl)
        others = [m for m in mistakes(name) if m.name != mistake.name]
        finding = HOOKS[name].explain(program, mistake.impl, None, others)
        said = shown_hint(finding, report)
        if WRITTEN_FOR not in said or finding.hint or not isinstance(report.hint, Hint):
            continue
        rule = _failing_rule(topic, report, exc)
        assert rule is not None, (mistake.name, said)
        written = said.partition(f" {WRITTEN_FOR} ")[2]
        assert written == rule, (mistake.name, written, rule)
        assert rule.about.fits(finding.methods, finding.divergence), mistake.name
        others_shown = [h for h in hints if h != rule and h not in rule and h in written]
        assert not others_shown, (mistake.name, others_shown)
        shown += 1
    return shown


def test_a_written_for_hint_is_the_failing_rule_s_own() -> None:
    """For each catalogue mistake, left out as for a mistake nobody listed: a "written for"
    hint after the place is the hint of the rule that failed (never another rule's of the
    same method), and the first diverging call touches what that hint is about."""
    shown = {name: _written_for_hints(name) for name in sorted(NOT_ABOUT)}
    assert sum(shown.values()) >= 3, shown  # the rule is exercised, not vacuous


def _policy_call(
    method: str, before: dict[str, Any], mine: dict[str, Any], theirs: dict[str, Any]
) -> Divergence:
    return Divergence(
        method, f"p.{method}()", before, ("returned None", mine), ("returned None", theirs), 0
    )


def test_hints_offered_as_alternatives_fit_only_where_one_of_them_fits() -> None:
    """One hint's method with the other's fields is neither hint's case."""
    pair = either(
        Hint("a", About(("pin",), ("pins",))), Hint("b", About(("unpin",), ("used",)))
    ).about
    before = {"resident": ["a"], "pins": {"a": 1}, "used": 10}
    d = _call({"pins": {}, "resident": []}, {"pins": {"a": 1}, "resident": ["a"]})
    assert not pair.fits(("unpin",), d)  # the union (unpin, and pins among the fields) would
    assert About(pair.methods, pair.fields).fits(("unpin",), d)
    assert pair.fits(("unpin",), _call({**before, "used": 9}, before))


def test_the_pins_hint_is_not_shown_for_a_remove_that_leaves_a_pin_behind() -> None:
    """The candidates' rule (len, a victim) is not the record of pins a remove forgets."""
    from servelab.grading.eviction_policy import HINTS

    before = {"len": 0, "eviction order": [], "counts": {"m0": 1}, "pinned": ["m0"]}
    gone = {"len": 0, "eviction order": [], "counts": {}, "pinned": []}
    kept = _policy_call("update_on_remove", before, {**gone, "pinned": ["m0"], "len": 1}, gone)
    assert not HINTS["pins"].about.fits(("LFU.update_on_remove",), kept)
    free = {**before, "pinned": [], "len": 1, "eviction order": ["m0"]}
    ignored = _policy_call("update_on_pin", free, {**free, "pinned": ["m0"]}, before)
    assert HINTS["pins"].about.fits(("LFU.update_on_pin",), ignored)


def test_the_history_hint_needs_a_pinned_key_before_the_call() -> None:
    """A SIEVE put that inserts at the hand changes the order alone, with nothing pinned: the
    step's order hint (the hand, or a pinned key's history) is about neither."""
    from servelab.grading.eviction_policy import _SIEVE_HINTS

    order = _SIEVE_HINTS["order-matches-model"].about
    fields = {"len": 2, "visited": [], "hand": "m3"}
    put = _policy_call(
        "update_on_put",
        {**fields, "eviction order": ["m3", "m0"], "pinned": []},
        {**fields, "eviction order": ["m1", "m3", "m0"], "pinned": []},
        {**fields, "eviction order": ["m3", "m0", "m1"], "pinned": []},
    )
    assert not order.fits(("SIEVE.update_on_put",), put)
    unpin = _policy_call(
        "update_on_unpin",
        {**fields, "eviction order": ["m0"], "pinned": ["m3"]},
        {**fields, "eviction order": ["m0", "m3"], "pinned": []},
        {**fields, "eviction order": ["m3", "m0"], "pinned": []},
    )
    assert order.fits(("SIEVE.update_on_unpin",), unpin)


class _GetPinsAgain(checkpoint("weight-cache", 5)):  # type: ignore[misc]
    """Keeps pins as counts, but a get of a pinned key pins it once more."""

    def get(self, key: str) -> Any:
        value = super().get(key)
        if self._pins.get(key):
            self._pins[key] += 1
        return value


def test_a_field_hint_of_other_methods_is_not_shown_for_an_extra_amount_from_get() -> None:
    """The pins hint (about pin and unpin) states a rule this cache keeps: the extra pin comes
    from get, so the report shows the place and the difference without that rule."""
    import servelab
    from servelab.grading import GradeFailure

    with pytest.raises(GradeFailure) as failed:
        servelab.grade("weight-cache", _GetPinsAgain, 5, quiet=True)
    hint = next(line for line in str(failed.value).splitlines() if "hint:" in line)
    assert "start at your `get`" in hint and "`pins` of 'a' to 2" in hint, hint
    assert WRITTEN_FOR not in hint and "pins are counts" not in hint, hint
