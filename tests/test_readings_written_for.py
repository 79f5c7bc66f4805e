"""Scheduler, token-budget and offload readings are shown only on the difference each was
written for: its method, the fields it explains, which way they differ, and which side raised.

Each reading is tried twice: on the difference it was written for (it speaks) and on one it
was not (another field differs too, it goes the other way, or another side raised: it keeps
quiet, and the report keeps the place and the difference). Mistakes graded end to end are in
``tests/unlisted`` (what their reports must and must not say is in ``tests/test_localise.py``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from buggy_impls import failing_report
from servelab.grading.mistakes.token_budget import Correct
from servelab.grading.readings import Difference
from servelab.grading.readings.kv_offload import kv_offload_reading
from servelab.grading.readings.scheduler import scheduler_reading
from servelab.grading.readings.token_budget import token_budget_reading
from servelab.kv.budget import BudgetStep
from test_readings_offload_budget import _full_pool
from unlisted import token_budget as budget_slips
from unlisted import unlisted

Fields = dict[str, Any]
NONE = "returned None"


def _d(
    method: str,
    before: Fields,
    mine: Fields,
    theirs: Fields,
    outcomes: tuple[str, str] = (NONE, NONE),
    args: tuple[Any, ...] = (),
    subject: Any = None,
    policy: str = "",
) -> Difference:
    """A first diverging call: fields not given after the call are as they were before."""
    return Difference(
        method,
        policy,
        args,
        before,
        {**before, **mine},
        {**before, **theirs},
        outcomes[0],
        outcomes[1],
        subject,
    )


def _seq(seq_id: int, generated: int = 0, max_new_tokens: int = 4) -> Any:
    return SimpleNamespace(
        seq_id=seq_id,
        num_generated=generated,
        max_new_tokens=max_new_tokens,
        is_finished=generated >= max_new_tokens,
    )


# --- scheduler -------------------------------------------------------------------------------

_EMPTY: Fields = {"running": [], "waiting": [], "tables": {}}


def test_too_large_speaks_when_only_the_reference_raises() -> None:
    written = _d("add", _EMPTY, {"waiting": [(0, 20)]}, {}, (NONE, "raised RequestTooLarge"))
    assert "raises RequestTooLarge" in (scheduler_reading(written) or "")
    both = _d("add", _EMPTY, {}, {}, ("raised ValueError", "raised RequestTooLarge"))
    assert scheduler_reading(both) is None


def test_the_watermark_rule_speaks_when_yours_admits_what_it_must_refuse() -> None:
    lenient = _d("fits", {"num_free": 6}, {}, {}, ("returned True", "returned False"), (11,))
    assert "the watermark stays free" in (scheduler_reading(lenient) or "")
    raising = _d("fits", {"num_free": 6}, {}, {}, ("raised ValueError", "returned True"), (0,))
    assert scheduler_reading(raising) is None


def test_a_step_early_speaks_only_of_a_sequence_one_token_short() -> None:
    before: Fields = {"running": [(0, 6), (1, 6)], "tables": {0: [0], 1: [1]}}
    mine: Fields = {"running": [], "tables": {}}
    theirs: Fields = {"running": [(1, 6)], "tables": {1: [1]}}
    one_left = SimpleNamespace(running=[_seq(0, 4), _seq(1, 3)])
    early = scheduler_reading(_d("retire", before, mine, theirs, subject=one_left))
    assert "a step early" in (early or "")
    three_left = SimpleNamespace(running=[_seq(0, 4), _seq(1, 1)])
    assert scheduler_reading(_d("retire", before, mine, theirs, subject=three_left)) is None


def test_never_retiring_speaks_only_when_the_reference_retired() -> None:
    before: Fields = {"running": [(0, 6)], "out.finished": []}
    unchanged = _d("retire", before, {}, {"running": []})
    assert "bm.free_seq" in (scheduler_reading(unchanged) or "")
    # both keep the sequence; only the output differs: no retire rule about running
    output_only = _d("retire", before, {"out.finished": []}, {"out.finished": [0]})
    assert scheduler_reading(output_only) is None


def test_a_finished_sequence_left_running_speaks_when_yours_returned_or_raised() -> None:
    before: Fields = {"running": [(0, 4), (1, 2)]}
    mine: Fields = {"running": [(1, 2)]}
    theirs: Fields = {"running": []}
    for outcome in (NONE, "raised IndexError"):
        left = scheduler_reading(_d("retire", before, mine, theirs, (outcome, NONE)))
        assert "left finished sequence(s) [1] running" in (left or "")
    both = _d("retire", before, mine, theirs, ("raised IndexError", "raised KeyError"))
    assert scheduler_reading(both) is None


def test_a_reordered_queue_speaks_only_when_the_queue_alone_differs() -> None:
    before = {"waiting": [(0, 2), (1, 2)], "running": []}
    reordered = _d("admit", before, {"waiting": [(1, 2), (0, 2)]}, {})
    assert "first come, first served" in (scheduler_reading(reordered) or "")
    also_running = _d("admit", before, {"waiting": [(1, 2), (0, 2)], "running": [(2, 1)]}, {})
    assert scheduler_reading(also_running) is None


def test_the_decode_order_speaks_only_of_running_and_its_decodes() -> None:
    before: Fields = {"running": [(1, 3), (2, 3), (0, 3)], "waiting": [], "out.decodes": []}
    by_id: Fields = {"running": [(0, 3), (1, 3), (2, 3)], "out.decodes": [0, 1, 2]}
    assert "order of their ids" in (scheduler_reading(_d("decode", before, by_id, {})) or "")
    requeued = {**by_id, "waiting": [(3, 1)]}
    assert scheduler_reading(_d("decode", before, requeued, {})) is None
    # two sequences: reversed is their id order too, and the reading says reversed, not by id
    two: Fields = {"running": [(1, 3), (0, 3)], "waiting": [], "out.decodes": []}
    flipped: Fields = {"running": [(0, 3), (1, 3)], "out.decodes": [0, 1]}
    said = scheduler_reading(_d("decode", two, flipped, {})) or ""
    assert "reversed" in said and "by id" not in said


def test_another_victim_is_read_as_one_only_with_as_many_victims_on_both_sides() -> None:
    before: Fields = {"running": [(0, 3), (1, 3), (2, 3)], "waiting": []}
    theirs = {"running": [(0, 3), (1, 3)], "waiting": [(2, 3)], "out.preempted": [2]}
    other = {"running": [(1, 3), (2, 3)], "waiting": [(0, 3)], "out.preempted": [0]}
    assert "newest running" in (scheduler_reading(_d("decode", before, other, theirs)) or "")
    more = {"running": [(0, 3)], "waiting": [(1, 3), (2, 3)], "out.preempted": [2, 1]}
    extra = scheduler_reading(_d("decode", before, more, theirs)) or ""
    assert "yours preempted [1] as well as [2]" in extra
    assert "not the one whose append failed" not in extra


def _preempt(mine: Fields, theirs: Fields, before: Fields | None = None) -> str | None:
    start = before or {"waiting": [(2, 1)], "tables": {0: [0], 1: [1]}, "num_free": 0}
    victim = SimpleNamespace(seq_id=1)
    return scheduler_reading(_d("preempt", start, mine, theirs, args=(victim, None)))


def test_kept_blocks_speak_only_when_yours_kept_the_victims_table() -> None:
    queued = {"waiting": [(1, 3), (2, 1)]}
    freed = {**queued, "tables": {0: [0]}, "num_free": 1}
    assert "give back its blocks" in (_preempt(queued, freed) or "")
    # yours freed the victim, and another sequence's blocks too: not a block kept
    too_much = {**queued, "tables": {}, "num_free": 2}
    assert _preempt(too_much, freed) is None


def test_the_front_of_waiting_speaks_only_when_waiting_alone_differs() -> None:
    freed: Fields = {"tables": {0: [0]}, "num_free": 1}
    front = {**freed, "waiting": [(1, 3), (2, 1)]}
    back = {**freed, "waiting": [(2, 1), (1, 3)]}
    assert "front of waiting" in (_preempt(back, front) or "")
    kept = {"waiting": [(2, 1), (1, 3)]}  # and the blocks kept: two rules broken, not one
    assert _preempt(kept, front) is None


def test_a_victim_missing_from_the_output_speaks_only_when_yours_has_fewer() -> None:
    before = {"out.preempted": [], "waiting": [(1, 3)]}
    missing = _preempt({"out.preempted": []}, {"out.preempted": ["<sequence 1>"]}, before)
    assert "did not put sequence 1" in (missing or "")
    # the victim once on both sides; the lists differ by another entry: no missing victim
    other = _preempt(
        {"out.preempted": ["<sequence 1>", "<sequence 4>"]},
        {"out.preempted": ["<sequence 1>"]},
        before,
    )
    assert other is None


# --- token budget ----------------------------------------------------------------------------


def test_a_budget_victim_reading_needs_as_many_victims_and_an_extra_one_says_so() -> None:
    before: Fields = {"running": [(0, 3), (1, 3), (2, 3)], "waiting": []}
    theirs = {"running": [(0, 3), (1, 3)], "waiting": [(2, 3)]}
    oldest = {"running": [(1, 3), (2, 3)], "waiting": [(0, 3)]}
    d = _d("schedule_running", before, oldest, theirs, ("returned 1", "returned 1"))
    assert "yours preempted request 0" in (token_budget_reading(d) or "")
    two = {"running": [(0, 3)], "waiting": [(1, 3), (2, 3)]}
    # an extra victim is told only where yours, run again, preempts twice with no retry
    # between: a scheduler that preempts two at each failed extend
    preempts_two = next(u for u in unlisted() if u.name == "a failed extend preempts two").impl
    returned = ("returned 1", "returned 1")
    args = (BudgetStep(), 10)
    d = _d("schedule_running", before, two, theirs, returned, args, _full_pool(preempts_two))
    extra = token_budget_reading(d) or ""
    assert "as well as [2]" in extra and "yours preempted request" not in extra
    d = _d("schedule_running", before, two, theirs, returned, args, _full_pool(Correct))
    assert "as well as" not in (token_budget_reading(d) or "")


def _budget_preempt(mine: Fields, theirs: Fields) -> str | None:
    before: Fields = {"waiting": [], "tables": {2: [2]}, "num_computed_tokens": {2: 2}}
    victim = SimpleNamespace(seq_id=2)
    return token_budget_reading(_d("preempt", before, mine, theirs, args=(victim, None)))


_RESET: Fields = {"waiting": [(2, 3)], "tables": {}, "num_computed_tokens": {2: 0}}


def test_kept_blocks_of_a_request_speak_only_beside_a_right_queue() -> None:
    kept = {**_RESET, "tables": {2: [2]}}
    assert "gives back its blocks" in (_budget_preempt(kept, _RESET) or "")
    kept_and_lost = {**kept, "waiting": []}
    assert _budget_preempt(kept_and_lost, _RESET) is None


def test_computed_tokens_left_or_dropped_are_told_apart() -> None:
    left = _budget_preempt({**_RESET, "num_computed_tokens": {2: 2}}, _RESET)
    assert "num_computed_tokens at 2" in (left or "")
    dropped = _budget_preempt({**_RESET, "num_computed_tokens": {}}, _RESET)
    assert "dropped request 2 from num_computed_tokens" in (dropped or "")
    # with the queue wrong too, the count is not the one difference: no reading of it
    both = _budget_preempt({**_RESET, "num_computed_tokens": {2: 2}, "waiting": []}, _RESET)
    assert both is None


def test_the_cap_speaks_when_yours_returned_with_too_many_running() -> None:
    sched = SimpleNamespace(max_num_seqs=1, waiting=[])
    before: Fields = {"running": [(0, 3)], "waiting": [(1, 3)]}
    over = {"running": [(0, 3), (1, 3)], "waiting": []}
    d = _d("admit", before, over, {}, subject=sched)
    assert "max_num_seqs = 1" in (token_budget_reading(d) or "")
    d = _d("admit", before, over, {}, ("raised OutOfBlocks", NONE), subject=sched)
    assert token_budget_reading(d) is None


def test_a_skipped_running_request_is_not_read_into_a_step_that_preempted() -> None:
    report, _ = failing_report("token-budget", budget_slips.RetryChargedTwice, 3)
    assert "scheduled nothing" not in report.hint, report.hint
    report, _ = failing_report("token-budget", budget_slips.RunningPromptNotChunked, 2)
    assert "scheduled nothing for running request 0" in report.hint, report.hint


# --- kv offload ------------------------------------------------------------------------------


def _tier(keys: list[str], pins: dict[str, int] | None = None, **more: Any) -> Fields:
    return {"keys": keys, "used": 10 * len(keys), "pins": pins or {}, "refs": {}, **more}


def _off(method: str, before: Fields, mine: Fields, theirs: Fields, *rest: Any) -> str | None:
    outcomes = rest[0] if rest else (NONE, NONE)
    args = rest[1] if len(rest) > 1 else ("a",)
    return kv_offload_reading(_d(method, before, mine, theirs, outcomes, args, policy="Tier"))


def test_a_pin_count_speaks_only_when_both_returned() -> None:
    before = _tier(["a"], {"a": 1})
    theirs = {"pins": {"a": 2}}
    as_a_set = _off("pin", before, {}, theirs, ("returned 1", "returned 2"))
    assert "each pin adds one" in (as_a_set or "")
    raised = _off("pin", before, {}, theirs, ("raised ChunkInUse", "returned 2"))
    assert raised is None


def test_may_evict_speaks_only_of_an_answer_that_changed_nothing() -> None:
    before = _tier(["a"], {"a": 1})
    answer = ("returned True", "returned False")
    assert "a lookup pinned" in (_off("can_evict", before, {}, {}, answer) or "")
    assert _off("can_evict", before, {"pins": {}}, {}, answer) is None


def test_victims_out_of_policy_order_are_read_only_when_nothing_changed() -> None:
    before = _tier(["a", "b", "c"])
    answer = ("returned ['c', 'b']", "returned ['a', 'b']")
    assert "front of the policy order" in (_off("_choose_victims", before, {}, {}, answer) or "")
    changed = _off("_choose_victims", before, {"keys": ["a", "b"]}, {}, answer)
    assert changed is None


def _two_tiers(cpu: list[str], disk: list[str], **more: Any) -> Fields:
    fields = {f"cpu.{k}": v for k, v in _tier(cpu).items()}
    fields.update({f"disk.{k}": v for k, v in _tier(disk).items()})
    return {**fields, **more}


def test_a_double_count_speaks_only_of_a_count_too_high() -> None:
    before = _two_tiers(["a"], ["a", "b"])
    high = ("returned 30", "returned 20")
    shows = ({"held_bytes": 30}, {"held_bytes": 20})  # the state shows held_bytes() too
    assert "counted twice" in (_off("held_bytes", before, *shows, high, ()) or "")
    moved = ({"held_bytes": 30, "cpu.keys": []}, {"held_bytes": 20})
    assert _off("held_bytes", before, *moved, high, ()) is None
    assert _off("held_bytes", before, {}, {}, ("returned 10", "returned 20"), ()) is None


def test_a_release_reading_speaks_of_yours_raising_or_both_returning() -> None:
    before = _two_tiers(["a"], [], **{"cpu.pins": {"a": 2}})
    found = ([("a", 0)],)
    left = _off("release", before, {}, {"cpu.pins": {"a": 1}}, (NONE, NONE), found)
    assert "left 2 pin(s) on 'a'" in (left or "")
    other = _off("release", before, {}, {"cpu.pins": {"a": 1}}, (NONE, "raised X"), found)
    assert other is None
    raised = _off("release", before, {}, {}, ("raised ChunkInUse", NONE), found)
    assert "does yours remove chunks?" in (raised or "")


def test_a_lookup_pinning_twice_speaks_only_when_pins_alone_differ() -> None:
    before = _two_tiers(["a"], ["a"])
    pinned = {"cpu.pins": {"a": 1}}
    both = {**pinned, "disk.pins": {"a": 1}}
    answer = ("returned [('a', 0)]", "returned [('a', 0)]")
    lookup = _off("lookup", before, both, pinned, answer, (["a"],))
    assert "first tier that holds it" in (lookup or "")
    moved = {**both, "disk.keys": []}
    assert _off("lookup", before, moved, pinned, answer, (["a"],)) is None
    slower = {"disk.pins": {"a": 1}}
    other = ("returned [('a', 1)]", "returned [('a', 0)]")
    lookup = _off("lookup", before, slower, pinned, other, (["a"],))
    assert "pinned 'a' in the disk tier where the cpu tier holds it" in (lookup or "")
    assert _off("lookup", before, {**slower, "cpu.keys": []}, pinned, other, (["a"],)) is None


@pytest.mark.parametrize("outcome", ["returned [b'a']", "raised ChunkNotFound"])
def test_a_retrieve_reads_kept_references_and_promotion_only_with_the_same_outcome(
    outcome: str,
) -> None:
    before = _two_tiers(["b"], ["a"])
    found = ([("a", 1)],)
    same = outcome == "returned [b'a']"
    kept = {"disk.refs": {"a": 1}}
    said = _off("retrieve", before, kept, {}, (outcome, "returned [b'a']"), found)
    assert ("leaves no reference" in (said or "")) is same
    promoted = {"cpu.keys": ["a"], "disk.keys": ["a", "b"]}
    said = _off("retrieve", before, {}, promoted, (outcome, "returned [b'a']"), found)
    assert ("promotes a chunk found below" in (said or "")) is same
