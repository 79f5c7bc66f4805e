"""A grade report states only the rules of the step graded and of the steps before it.

A check that an early step runs shares its hints with the later steps (one table per topic),
and a hint written for the last step names rules the learner has not met yet: "preempt the
latest running" in the report of a step that only admits. Such a hint is scoped
(:meth:`~servelab.grading.about.Hint.before`): an earlier step's grade shows its earlier text.
"""

from __future__ import annotations

import importlib
import pickle
import re
from typing import Any

import pytest

import servelab
from servelab.grading import GradeFailure
from servelab.grading.about import About, Hint, at_step
from servelab.grading.localise import Divergence
from servelab.grading.registry import load_topic
from servelab.kv.blocks import Slot
from servelab.kv.scheduler import RequestTooLarge

TOPICS = [
    "weight-cache",
    "eviction-policy",
    "block-manager",
    "prefix-cache",
    "scheduler",
    "token-budget",
    "kv-offload",
]

#: Words of a rule that a topic teaches from a step on, beyond the methods that step defines.
TAUGHT_FROM: dict[str, dict[str, int]] = {
    "weight-cache": {"victim": 2, "evict": 2, "unpinned": 3, "pinned": 3},
    "block-manager": {"fork": 3, "copy": 3, "copies": 3, "copied": 3, "shared": 3},
    "prefix-cache": {"evictable": 3, "reclaimed": 3, "reclaim": 3},
    "scheduler": {"preempt": 3, "preempted": 3, "finished": 2},
    "token-budget": {"preempt": 3, "preempted": 3, "prefix": 2},
    "kv-offload": {"cascade": 3, "promote": 3},
}
#: Later methods whose names step 1 already teaches as words (a pin holds a chunk from a
#: lookup until its retrieve completes: the docstring of the notebook's step-1 `pin`).
TAUGHT_AS_WORDS = {"kv-offload": {"lookup", "retrieve"}}


def _methods(impl: Any) -> set[str]:
    if isinstance(impl, dict):
        return set().union(*(_methods(c) for c in impl.values()))
    return {
        name
        for klass in impl.__mro__
        if klass.__module__.startswith("servelab.checkpoints")
        for name in vars(klass)
        if not name.startswith("__")
    }


def _shown(topic: str, number: int) -> list[tuple[str, str]]:
    """(check, hint as the grade of step ``number`` shows it) for every hint it can show:
    the probes of that step and those before, and its machine's hints for its own rules."""
    declared = load_topic(topic)
    module = importlib.import_module(f"servelab.grading.{topic.replace('-', '_')}")
    names = {v: k for k, v in getattr(module, "INVARIANTS", {}).items()}
    found = []
    for step in declared.steps:
        if step.number > number:
            break
        found += [(p.name, at_step(p.hint, number)) for p in step.probes]
        if step.number == number and step.machine is not None:
            for rule in step.machine.invariants:
                hint = step.machine.hints.get(names.get(rule, rule))
                if hint is not None:
                    found.append((f"machine: {rule}", at_step(hint, number)))
    return found


def _later_words(topic: str, number: int) -> dict[str, int]:
    steps = [s.number for s in load_topic(topic).steps]
    have = {s: _methods(servelab.checkpoint(topic, s)) for s in steps}
    later = {m: s for s in steps if s > number for m in have[s] - have[number]}
    words = {w: s for w, s in TAUGHT_FROM.get(topic, {}).items() if s > number}
    return {**{m: min(s for s in steps if s > number and m in have[s]) for m in later}, **words}


def _unscoped(topic: str, number: int) -> list[str]:
    later = _later_words(topic, number)
    for word in TAUGHT_AS_WORDS.get(topic, ()):
        later.pop(word, None)
    found = []
    for check, hint in _shown(topic, number):
        # a clause that names its step ("step 2's pop_victim", "step 3 preempts") is scoped
        for clause in re.split(r"[;:(),]", str(hint)):
            if re.search(r"\bstep \d", clause):
                continue
            words = set(re.findall(r"[A-Za-z_']+", clause))
            bad = sorted(w for w in words if w in later)
            if bad:
                found.append(f"{topic} step {number} [{check}] {bad}: {clause.strip()}")
    return found


@pytest.mark.parametrize("topic", sorted(TAUGHT_FROM))
def test_no_report_of_a_step_states_a_later_steps_rule(topic: str) -> None:
    steps = [s.number for s in load_topic(topic).steps]
    found = [line for n in steps[:-1] for line in _unscoped(topic, n)]
    assert found == []


def test_the_scan_finds_a_later_rule_in_an_unscoped_hint() -> None:
    """The scan can fail: the texts the last step shows, read at step 1, name its rules."""
    full = at_step(load_topic("token-budget").steps[0].machine.hints["model"], None)  # type: ignore[union-attr]
    assert "preempt the latest" in full
    later = _later_words("token-budget", 1)
    assert "preempt" in later and "preempt" in re.findall(r"[a-z_]+", full)


def test_a_hint_reads_as_the_step_before_it_is_scoped() -> None:
    hint = Hint("three", About(("decode",))).before(3, "two").before(2, "one")
    assert [str(at_step(hint, n)) for n in (1, 2, 3, 4, None)] == ["one", "two"] + ["three"] * 3
    assert at_step(hint, 1).about == hint.about  # type: ignore[attr-defined]
    again = pickle.loads(pickle.dumps(hint))
    assert again.earlier == hint.earlier and str(at_step(again, 1)) == "one"
    assert at_step("plain text", 1) == "plain text"


class AddChecksFreeNow(servelab.checkpoint("scheduler", 1)):  # type: ignore[misc]
    """Sizes a new request against the blocks free now, not the whole pool above the
    watermark: a request that fits later is refused."""

    def add(self, seq: Any) -> None:
        need = self.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        if need > self.bm.num_free - self.watermark:
            raise RequestTooLarge(f"sequence {seq.seq_id} needs up to {need} blocks")
        self.waiting.append(seq)


def _report(topic: str, impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failure:
        servelab.grade(topic, impl, step, quiet=True)
    return str(failure.value)


def test_a_step_1_report_keeps_the_rule_and_leaves_out_preemption() -> None:
    report = _report("scheduler", AddChecksFreeNow, 1)
    hint = report.partition("hint:")[2]
    assert "`add`" in hint and "num_blocks - watermark" in hint
    assert "preempt" not in report


def test_the_last_step_keeps_the_full_hint() -> None:
    hint = load_topic("scheduler").steps[0].probes[0].hint
    assert "preempted" in at_step(hint, 3) and "preempted" not in at_step(hint, 1)


# ----------------------------------------------- a hint written for another cause of the symptom


class AppendPopsFree(servelab.checkpoint("block-manager", 2)):  # type: ignore[misc]
    """Takes the new block off the free list itself: with none left it raises IndexError, and
    nothing has changed (the wrong error, not a state changed before raising)."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            block = self.free.popleft()
            self.ref[block] = 1
            table.append(block)
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, None)


SAFETY = "validate everything before changing anything"


def _append_call(mine: tuple[str, dict[str, Any]]) -> Divergence:
    before = {"tables": {0: [0]}, "lengths": {0: 4}, "refcounts": {0: 1}, "free": []}
    before |= {"num_free": 0}
    return Divergence(
        "append_slot", "bm.append_slot(0)", before, mine, ("raised OutOfBlocks", before), 0
    )


def test_exception_safety_is_about_a_state_changed_before_the_raise() -> None:
    hint = load_topic("block-manager").step(2).probes[-1].hint
    assert SAFETY in hint
    about: About = hint.about  # type: ignore[attr-defined]
    before = _append_call(("", {}))
    wrong_error = _append_call(("raised IndexError", dict(before.before)))
    changed = _append_call(("raised OutOfBlocks", {**before.before, "lengths": {0: 5}}))
    assert not about.fits(["append_slot"], wrong_error)
    assert about.fits(["append_slot"], changed)


def test_a_wrong_error_that_changed_nothing_is_not_sent_to_exception_safety() -> None:
    hint = _report("block-manager", AppendPopsFree, 2).partition("hint:")[2]
    assert "`append_slot`" in hint and "IndexError" in hint and "OutOfBlocks" in hint
    assert SAFETY not in hint
