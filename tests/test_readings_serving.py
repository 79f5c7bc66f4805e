"""The scheduler, token-budget and kv-offload readings name a slip only where the located call
proves it: each is shown on a real slip graded end to end (tests/unlisted), and kept back on a
difference that looks alike but does not prove its rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.mistakes.scheduler.preempt_current import Buggy as PreemptsTheAsker
from servelab.grading.readings import Difference
from servelab.grading.readings.kv_offload import kv_offload_reading
from servelab.grading.readings.scheduler import scheduler_reading
from servelab.grading.readings.token_budget import token_budget_reading
from servelab.kv.blocks import BlockManager
from servelab.kv.budget import BudgetStep
from servelab.kv.offload.cost import LLAMA_8B
from servelab.kv.scheduler import Sequence, StepOutput
from test_readings_offload_budget import _two_running
from unlisted import unlisted

# what the report of each slip must say, and must not
SHOWN = {
    "fit counts a partial block free": ("admits 5 tokens but refuses 6", "watermark stays"),
    "the victim is never the asker": ("the oldest running", "whose append failed;"),
    "admitted prompts never charged": ("with a budget of 10", "twice"),
    "no retry after preempting": ("whose extend failed is retried", "off by one"),
    "a chunk of exactly the capacity refused": ("one of exactly the capacity fits", "miss"),
    "put returns the evicted keys": ("(key, payload) pairs", "no one method"),
    "victims dropped before the write": ("changes nothing", "torn"),
    "lookup says tier 0": ("index of the tier it pinned it in", "never added"),
    "recompute at one FLOP per parameter": ("weights term counted half", "K and V"),
    "load over the disk link": ("over the 'disk' link", "K and V"),
    "decode restarts after preempting": ("2 times in one step", "counted twice"),
    "admit reserves the future": ("asks about prompt + max_new_tokens", "written for"),
    "admit puts newcomers first": ("admit puts each sequence it admits at the back", "reverse"),
    "worth loading over the host link": ("as a load from the 'cpu' tier would", "the work is"),
}
SLIPS = [u for u in unlisted() if u.name in SHOWN]


def test_every_slip_named_here_is_in_the_unlisted_set() -> None:
    assert {u.name for u in SLIPS} == set(SHOWN)


@pytest.mark.parametrize("u", SLIPS, ids=[u.name for u in SLIPS])
def test_the_reading_names_the_slip(u: Any) -> None:
    report, _ = failing_report(u.topic, u.impl, u.step)
    said, unsaid = SHOWN[u.name]
    assert said in report.hint and unsaid not in report.hint, report.hint


def test_a_fits_admitting_one_more_is_no_block_count_when_the_next_needs_more_blocks() -> None:
    # fits(8) answered True where 8 tokens (2 blocks of 4) leave less than the watermark: the
    # next size, 9, needs another block, so the answers of 8 and 9 prove no count
    sched = checkpoint("scheduler", 1)(BlockManager(num_blocks=4, block_size=4), watermark=3)
    state = {"num_free": 4}
    d = Difference("fits", "", (8,), state, state, state, "returned True", "returned False", sched)
    assert "ceil(n / block_size)" not in (scheduler_reading(d) or "")


def _running(sched: Any) -> list[tuple[int, int]]:
    return [(s.seq_id, s.num_tokens) for s in sched.running]


def _victim_difference(cls: Any, free: int) -> Difference:
    """Two running sequences of one full block each and ``free`` free blocks: with one, the
    first decodes and the second, the newest, finds none; with none, the first finds none.
    The decode of ``cls`` beside the reference's."""
    after = []
    for impl in (cls, checkpoint("scheduler", 3)):
        sched = impl(BlockManager(num_blocks=2 + free, block_size=1), watermark=0)
        sched.add(Sequence.dummy(1, prompt_len=1, max_new_tokens=1))
        sched.add(Sequence.dummy(0, prompt_len=1, max_new_tokens=1))
        sched.admit(StepOutput())
        subject = copy.deepcopy(sched)
        out = StepOutput()
        sched.decode(out)
        after.append(
            {"running": _running(sched), "out.preempted": [s.seq_id for s in out.preempted]}
        )
        if impl is cls:
            mine = subject
    before = {"running": _running(mine), "lengths": {1: 1, 0: 1}, "num_free": free}
    return Difference(
        "decode", "", (), before, after[0], after[1], "returned None", "returned None", mine
    )


def test_the_victim_is_called_the_one_whose_append_failed_only_when_it_was() -> None:
    asker = scheduler_reading(_victim_difference(PreemptsTheAsker, 0)) or ""
    assert "the one whose append failed" in asker
    oldest = unlisted_reading("the victim is never the asker")
    assert "the one whose append failed" not in oldest and "the oldest running" in oldest


def unlisted_reading(name: str) -> str:
    u = next(u for u in unlisted() if u.name == name)
    return scheduler_reading(_victim_difference(u.impl, 1)) or ""


def test_chunks_within_the_budget_are_no_overspent_budget() -> None:
    state: dict[str, Any] = {}
    d = Difference(
        "schedule_running",
        "",
        (BudgetStep(), 10),
        state,
        state,
        state,
        "returned 8",
        "returned 8",
        _two_running(checkpoint("token-budget", 3)),
    )
    assert "with a budget of" not in (token_budget_reading(d) or "")


def test_a_skipped_request_is_read_as_not_retried_only_after_the_same_victims() -> None:
    shown = ["<sequence 2>"]
    mine = {"out.scheduled": [0], "out.preempted": shown, "num_computed_tokens": {0: 3}}
    theirs = {"out.scheduled": [0, 1], "out.preempted": [], "num_computed_tokens": {0: 3, 1: 3}}
    d = Difference(
        "schedule_running",
        "",
        (BudgetStep(), 8),
        {},
        mine,
        theirs,
        "returned 7",
        "returned 6",
        _two_running(checkpoint("token-budget", 3)),
    )
    assert "is retried" not in (token_budget_reading(d) or "")


class _Tier:
    capacity = 100


def _put(size: int, mine: str, theirs: str) -> str | None:
    state = {"keys": [], "used": 0, "pins": {}, "refs": {}}
    d = Difference("put", "", ("a", bytes(size)), state, state, state, mine, theirs, _Tier())
    return kv_offload_reading(d)


def test_a_too_large_chunk_is_read_as_an_exact_fit_only_at_the_capacity() -> None:
    assert "exactly the capacity" in (_put(100, "raised ChunkTooLarge", "returned []") or "")
    assert "exactly the capacity" not in (_put(99, "raised ChunkTooLarge", "returned []") or "")


def test_keys_returned_are_read_as_pairs_missing_only_beside_the_reference_s_pairs() -> None:
    said = _put(30, "returned ['a', 'b']", "returned [('a', b'aa'), ('b', b'bb')]") or ""
    assert "(key, payload) pairs" in said
    other = _put(30, "returned ['a', 'b']", "returned [('a', b'aa')]") or ""
    assert "(key, payload) pairs" not in other


class _Hierarchy:
    model = LLAMA_8B
    flops = 400e12
    chunk_tokens = 256
    links = checkpoint("kv-offload", 4)["Hierarchy"].links


def _seconds(method: str, args: tuple[Any, ...], mine: float, theirs: float) -> str | None:
    state = {"cpu.keys": [], "disk.keys": []}
    d = Difference(
        method,
        "Hierarchy",
        args,
        state,
        state,
        state,
        f"returned {mine!r}",
        f"returned {theirs!r}",
        _Hierarchy(),
    )
    return kv_offload_reading(d)


def test_a_load_is_read_as_over_another_link_only_when_it_equals_that_load() -> None:
    h = checkpoint("kv-offload", 4)["Hierarchy"](1000, 1000)
    cpu, disk = h.load_seconds(4096, "cpu"), h.load_seconds(4096, "disk")
    assert "'disk' link" in (_seconds("load_seconds", (4096, "cpu"), disk, cpu) or "")
    assert "link" not in (_seconds("load_seconds", (4096, "cpu"), disk * 1.5, cpu) or "")


def test_a_recompute_term_is_read_as_halved_only_when_it_is_exactly_half() -> None:
    h = checkpoint("kv-offload", 4)["Hierarchy"](1000, 1000)
    right = h.recompute_seconds(256)
    weights = 2 * LLAMA_8B.params * 256 / 400e12
    half = right - weights / 2
    assert "counted half" in (_seconds("recompute_seconds", (256,), half, right) or "")
    near = right - weights / 3
    assert "counted" not in (_seconds("recompute_seconds", (256,), near, right) or "")


def test_running_in_another_order_is_read_only_when_it_holds_the_same_sequences() -> None:
    before = {"running": [], "waiting": [(0, 1), (1, 1)]}
    swapped = {"running": [(1, 1), (0, 1)], "waiting": []}
    right = {"running": [(0, 1), (1, 1)], "waiting": []}
    fewer = {"running": [(1, 1)], "waiting": [(0, 1)]}
    read = scheduler_reading(
        Difference("admit", "", (), before, swapped, right, "returned None", "returned None", None)
    )
    assert "order of arrival" in (read or "")
    other = scheduler_reading(
        Difference("admit", "", (), before, fewer, right, "returned None", "returned None", None)
    )
    assert "order of arrival" not in (other or "")


def test_a_worth_loading_answer_is_put_on_another_link_only_when_every_size_agrees() -> None:
    h = checkpoint("kv-offload", 4)["Hierarchy"](1000, 1000)
    state = {"cpu.keys": [], "disk.keys": []}
    # one answer that differs proves no link: the right rule at every other size
    d = Difference(
        "worth_loading",
        "Hierarchy",
        (8192, "disk"),
        state,
        state,
        state,
        "returned True",
        "returned False",
        h,
    )
    assert kv_offload_reading(d) is None


def test_a_sequence_decoded_twice_is_told_of_a_retry_only_after_a_preemption() -> None:
    before = {"running": [(0, 1), (1, 1)]}
    mine = {"running": [(0, 2), (1, 2)], "out.decodes": [0, 1, 1], "out.preempted": []}
    theirs = {"running": [(0, 2), (1, 2)], "out.decodes": [0, 1], "out.preempted": []}
    d = Difference("decode", "", (), before, mine, theirs, "returned None", "returned None", None)
    said = scheduler_reading(d) or ""
    assert "decoded sequence 1 2 times" in said and "retries" not in said


def test_a_head_left_waiting_is_asked_about_its_future_only_when_fits_refuses_that() -> None:
    # one admission per step leaves the head waiting too, though fits admits its future
    u = next(u for u in unlisted() if u.name == "admit stops after one admission")
    report, _ = failing_report(u.topic, u.impl, u.step)
    assert "max_new_tokens?" not in report.hint, report.hint
