"""The eviction-policy grader: passes correct LFU/SIEVE classes, fails each known mistake."""

from __future__ import annotations

import contextlib
import heapq
import io
from dataclasses import replace
from typing import Any

import hypothesis
import pytest

from buggy_impls import correct_impl, correct_module, diagnosed_hint, mistakes
from servelab import checkpoint
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.grading.diagnose import HOOKS
from servelab.grading.eviction_policy import REPLAY as TOPIC_REPLAY
from servelab.grading.readings import reading
from servelab.grading.readings.eviction_policy_order import ONLY_READS
from servelab.weights.policies import LFU, SIEVE, NoVictim

TOPIC = "eviction-policy"
MISTAKES = mistakes(TOPIC)


def test_every_mistake_named_in_the_issue_is_kept() -> None:
    names = {m.name for m in MISTAKES}
    assert {"lfu_newest_tie", "sieve_no_wrap", "sieve_keeps_visited"} <= names
    assert {"lfu_ignores_pins", "sieve_ignores_pins"} <= names


@pytest.mark.parametrize(
    "impl",
    [correct_impl(TOPIC), correct_module(TOPIC)],
    ids=["learner-dict", "learner-module"],
)
def test_correct_policies_pass_every_step(impl: Any) -> None:
    report = grade(TOPIC, impl, out=io.StringIO())
    assert report.passed and report.text.endswith("PASSED")


def test_the_reference_policies_pass_every_step_that_reads_no_skeleton_field() -> None:
    # Step 3 reads the notebook skeleton's attributes (queue, visited, hand), which the
    # package's O(1) SIEVE does not have; every other step goes through the interface alone.
    topic = load_topic(TOPIC)
    interface_only = replace(topic, steps=[s for s in topic.steps if s.number != 3])
    report = grade(interface_only, {"LFU": LFU, "SIEVE": SIEVE}, out=io.StringIO())
    assert report.passed
    with pytest.raises(GradeFailure, match="no attribute 'queue'"):
        grade(TOPIC, {"LFU": LFU, "SIEVE": SIEVE}, step=4, out=io.StringIO())


def test_the_lfu_steps_take_a_single_lfu_class() -> None:
    assert grade(TOPIC, correct_module(TOPIC).LFU, step=2, out=io.StringIO()).passed
    with pytest.raises(GradeFailure, match="grades both classes, LFU and SIEVE"):
        grade(TOPIC, correct_module(TOPIC).LFU, step=3, out=io.StringIO())


@pytest.mark.parametrize("step", [3, 4, None])
def test_a_class_passed_alone_where_both_are_graded_is_told_before_any_check(
    step: int | None,
) -> None:
    sieve = correct_impl(TOPIC)["SIEVE"]
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, sieve, step=step, out=io.StringIO())
    shown = 4 if step is None else step
    cell = "SIEVERemovals" if shown == 3 else "SIEVE"
    assert failed.value.report.lines[1:] == [
        f"  ✗ step {shown} grades both classes, LFU and SIEVE; this grade cell passed the "
        f"class `{sieve.__name__}` alone",
        f'    hint: pass them as the notebook\'s grade cell does: grade("eviction-policy", '
        f'{{"LFU": LFU, "SIEVE": {cell}}}, step={shown})',
        "FAILED",
    ]
    with pytest.raises(GradeFailure, match=r"passed a dict without 'LFU'\n"):
        grade(TOPIC, {"SIEVE": sieve}, step=step, out=io.StringIO())


def test_an_lfu_step_given_another_class_names_what_it_looks_for() -> None:
    sieve = correct_impl(TOPIC)["SIEVE"]
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, sieve, step=1, out=io.StringIO())
    text = str(failed.value)
    assert (
        f"step 1 grades the class LFU; this grade cell passed the class `{sieve.__name__}`" in text
    )
    assert 'grade("eviction-policy", LFUCounts, step=1)' in text
    assert "reproduce:" not in text and "no one method" not in text


def test_each_policy_takes_two_steps() -> None:
    steps = load_topic(TOPIC).steps
    assert [s.number for s in steps] == [1, 2, 3, 4]
    assert all(s.machine is not None for s in steps), "every step has its state machine"
    assert all("LFU" in s.title for s in steps[:2]) and all("SIEVE" in s.title for s in steps[2:])


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


@pytest.mark.slow
@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_state_machine_alone_catches_each_mistake(mistake: Any, seed: int | None) -> None:
    # Without the probes, the final step's machine (LFU and SIEVE, a policy per program) still
    # finds it, whatever the seed: a derandomized run's seed changes whenever the machine's
    # source does.
    step = load_topic(TOPIC).steps[-1]
    check = step.machine
    assert check is not None
    if seed is not None:
        build = check.build
        check = replace(check, build=lambda impl: hypothesis.seed(seed)(build(impl)))
    machine_only = Topic(TOPIC, "machine only", [Step(step.number, step.title, (), check)])
    with pytest.raises(GradeFailure) as failure:
        grade(machine_only, mistake.impl, out=io.StringIO())
    assert "against their models" in failure.value.report.text


def test_the_state_machine_catches_what_no_probe_names() -> None:
    bug = next(m for m in MISTAKES if m.name == "lfu_remove_keeps_pin")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, bug.impl, out=io.StringIO())
    report = failure.value.report
    assert "LFU and SIEVE against their models" in report.text
    assert "comes back pinned" in report.text
    # the repro is code: replayed, the buggy class ends in a state the correct one never has
    # (a pop with every key pinned raises NoVictim in both, as it should)
    name = bug.impl["LFU"].__name__  # the program builds the graded class by its own name
    namespace: dict[str, Any] = {name: bug.impl["LFU"]}
    replay: dict[str, Any] = {name: correct_module(TOPIC).LFU}
    *calls, last = report.code.splitlines()
    for line in calls:
        for ns in (namespace, replay):
            with contextlib.suppress(NoVictim):
                exec(line, ns)
    assert replay["p"].__len__() != namespace["p"].__len__()
    # the program ends in the read the check made: pasted, len() of yours (-1) raises
    assert last == "len(p)"
    with pytest.raises(ValueError):
        exec(last, namespace)
    assert eval(last, replay) == 0


class _SieveWithoutQueue:
    """A SIEVE that keeps its keys somewhere the step-3 skeleton does not."""

    name = "SIEVE"

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.visited: dict[str, bool] = {}
        self.pinned: set[str] = set()
        self.hand = None

    def update_on_put(self, key: str, size: int) -> None:
        self.keys.append(key)
        self.visited[key] = False

    def update_on_hit(self, key: str) -> None:
        self.visited[key] = True

    def update_on_pin(self, key: str) -> None:
        self.pinned.add(key)

    def update_on_unpin(self, key: str) -> None:
        self.pinned.discard(key)

    def __len__(self) -> int:
        return len(self.keys) - len(self.pinned)


def test_the_field_steps_say_which_attribute_is_missing() -> None:
    impl = {"LFU": correct_module(TOPIC).LFU, "SIEVE": _SieveWithoutQueue}
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, impl, step=3, out=io.StringIO())
    assert "no attribute 'queue'" in failure.value.report.text


def test_a_machine_refuses_unknown_events() -> None:
    from servelab.testing.policies import LFUModel, policy_machine

    with pytest.raises(ValueError, match="evict"):
        policy_machine(LFU, LFUModel, ops=frozenset({"put", "evict"}))


LFUStep = checkpoint(TOPIC, 2)


class LenRaisesWhenPinned(LFUStep):  # type: ignore[misc, valid-type]
    """len() fails once a key is pinned."""

    def __len__(self) -> int:
        if self.pinned:
            raise KeyError("pinned")
        return int(super().__len__())


class OrderListsPinned(LFUStep):  # type: ignore[misc, valid-type]
    """eviction_order() sorts every resident key, pinned ones too."""

    def eviction_order(self) -> list[Any]:
        return sorted(self.count, key=lambda k: (self.count[k], self.reached[k]))


def test_a_len_that_raised_is_said_to_have_raised() -> None:
    program = (
        "p = LenRaisesWhenPinned()\np.update_on_put('a', 1)\np.update_on_put('b', 1)\n"
        "p.update_on_pin('a')\nlen(p)"
    )
    place = HOOKS[TOPIC].explain(program, LenRaisesWhenPinned, 2).place
    assert place is not None
    assert "yours raised KeyError where the reference returns 1" in place
    assert "returned None" not in place


def test_an_lfu_order_is_not_said_to_trial_pop_victim_on_a_copy() -> None:
    program = "p = OrderListsPinned()\np.update_on_put('m0', 1)\np.update_on_pin('m0')"
    place = HOOKS[TOPIC].explain(program, OrderListsPinned, 2).place
    assert place is not None
    assert "deep copy" not in place
    assert "lists the candidates alone (resident keys that are not pinned)" in place
    # SIEVE's says so only where a replay of the program shows a call changing the policy
    sieve = reading(TOPIC_REPLAY.reader, None, hidden_in="SIEVE.eviction_order")
    assert sieve is None and "trials pop_victim on a deep copy" in ONLY_READS


class _UnpinPushesOnlyAfterAHit(correct_impl(TOPIC)["LFU"]):  # type: ignore[misc]
    """Pushes an entry on unpin only for a key hit while pinned, as if the entry from before
    the pin were still in the heap: a pop while the key was pinned threw that one away."""

    def update_on_hit(self, key: str) -> None:
        if key in self.pinned:
            self.hit_while_pinned = getattr(self, "hit_while_pinned", set()) | {key}
        super().update_on_hit(key)

    def update_on_unpin(self, key: str) -> None:
        self.pinned.discard(key)
        if key in getattr(self, "hit_while_pinned", set()):
            self.hit_while_pinned.discard(key)
            heapq.heappush(self.heap, (self.count[key], self.reached[key], key))


@pytest.mark.parametrize("step", [2, None], ids=["its step", "every step"])
def test_an_unpin_that_pushes_only_after_a_pinned_hit_fails(step: int | None) -> None:
    # close to the catalogue's lfu_unpin_no_push, but it passed every probe and, until the
    # machines pinned the next victim and evicted past it, every program too
    impl = {"LFU": _UnpinPushesOnlyAfterAHit, "SIEVE": correct_impl(TOPIC)["SIEVE"]}
    with pytest.raises(GradeFailure, match="update_on_unpin"):
        grade(TOPIC, impl if step is None else _UnpinPushesOnlyAfterAHit, step, out=io.StringIO())


class _RemovalSkipsPinned(correct_impl(TOPIC)["SIEVE"]):  # type: ignore[misc]
    """When the cache removes the key under the hand, the hand skips on to the next newer
    unpinned key, passing over a pinned one that may be unpinned before the next sweep."""

    def update_on_remove(self, key: str) -> None:
        i = self.queue.index(key)
        if self.hand == key:
            later = [k for k in self.queue[i + 1 :] if k not in self.pinned]
            self.hand = later[0] if later else None
        del self.queue[i]
        del self.visited[key]
        self.pinned.discard(key)


def test_a_removal_whose_hand_skips_a_pinned_key_fails_its_step() -> None:
    # step 3's machine removes the key under a pointed hand with the next key pinned,
    # visited or as it is; drawn apart, those events met on some seeds only
    impl = {"LFU": correct_impl(TOPIC)["LFU"], "SIEVE": _RemovalSkipsPinned}
    with pytest.raises(GradeFailure, match="hand is None; it should be"):
        grade(TOPIC, impl, 3, out=io.StringIO())


def test_a_removal_whose_hand_skips_a_pinned_key_is_placed_at_its_step() -> None:
    # the replay compares the hand, the visited bits and the pins too: the step-3 report
    # places the removal and states its rule, where it once found no one method
    step3 = checkpoint(TOPIC, 3)

    class Slip(step3["SIEVE"]):  # type: ignore[misc,valid-type]
        update_on_remove = _RemovalSkipsPinned.update_on_remove

    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, {**step3, "SIEVE": Slip}, 3, out=io.StringIO(), quiet=True)
    text = str(failure.value)
    assert "the difference starts in your `SIEVE.update_on_remove`" in text
    assert "the hand moves on to the next newer key" in text
    assert "no one method" not in text


def test_a_removal_that_moves_the_hand_rightly_passes_step_3() -> None:
    step3 = checkpoint(TOPIC, 3)
    grade(TOPIC, step3, 3, out=io.StringIO(), quiet=True)


class _SieveWrapsPastTheOldest(checkpoint("eviction-policy", 4)["SIEVE"]):  # type: ignore[misc]
    """Wraps the hand to the second key, never the oldest: with the hand past the only
    candidate, which is the oldest, the sweep goes round for ever."""

    def pop_victim(self):  # type: ignore[no-untyped-def]
        if len(self) == 0:
            return super().pop_victim()
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i >= len(self.queue):
                i = 1 if len(self.queue) > 1 else 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.hand = key
                self.update_on_remove(key)
                return key


def test_a_hang_in_a_read_the_check_makes_is_one_hang_not_a_program_shrunk_for_minutes() -> None:
    policies = {**checkpoint("eviction-policy", 4), "SIEVE": _SieveWrapsPastTheOldest}
    with pytest.raises(GradeFailure) as failure:
        grade("eviction-policy", policies, 4, quiet=True)
    report = str(failure.value)
    assert "returned, a read of your object by the check did not return within" in report
    assert "looping in your pop_victim()" in report
