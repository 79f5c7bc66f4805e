"""The readings of kv-offload and token-budget speak only from what the located call shows.

Each rule is read from the evidence (what yours returned and changed beside the reference):
where the evidence does not show the rule broken, the reading says nothing, or states the
rule without the cause it cannot see.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from buggy_impls import failing_report, shown_hint
from servelab import checkpoint
from servelab.grading import load_topic
from servelab.grading.diagnose import HOOKS
from servelab.grading.mistakes import mistakes
from servelab.grading.mistakes.token_budget import Correct
from servelab.grading.mistakes.token_budget.budget_spent_twice import Buggy as SpentTwice
from servelab.grading.readings import Difference
from servelab.grading.readings.kv_offload import kv_offload_reading
from servelab.grading.readings.token_budget import token_budget_reading
from servelab.kv.blocks import BlockManager, OutOfBlocks
from servelab.kv.budget import BudgetStep, Chunk
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import Sequence
from unlisted import unlisted


def _tier(keys: list[str], used: int, pins: dict[str, int] | None = None) -> dict[str, Any]:
    return {"keys": keys, "used": used, "pins": pins or {}, "refs": {}}


def _offload(method: str, args: tuple[Any, ...], before: Any, mine: Any, theirs: Any) -> Any:
    d = Difference(method, "Tier", args, before, mine[1], theirs[1], mine[0], theirs[0], None)
    return kv_offload_reading(d)


def test_a_put_that_misses_is_read_as_evicting_before_deciding_only_when_it_evicted() -> None:
    before = _tier(["a", "b"], 60, {"b": 1})
    payload = b"c" * 80
    evicted = _offload(
        "put",
        ("c", payload),
        before,
        ("returned None", _tier(["b"], 30, {"b": 1})),
        ("returned None", before),
    )
    assert "before deciding" in evicted
    # a miss that changed nothing is right, whatever else differs: no reading of "deciding"
    kept = _offload(
        "put",
        ("c", payload),
        before,
        ("returned None", before),
        ("returned []", _tier(["a", "b", "c"], 140, {"b": 1})),
    )
    assert kept is not None and "before deciding" not in kept


def _held(state: dict[str, Any], mine: int) -> str | None:
    d = Difference(
        "held_bytes", "Hierarchy", (), state, state, state, f"returned {mine}", "returned 60", None
    )
    return kv_offload_reading(d)


def test_held_bytes_above_the_reference_is_counted_twice_only_with_a_shared_chunk() -> None:
    def hierarchy(cpu: list[str], disk: list[str]) -> dict[str, Any]:
        return {
            "cpu.keys": cpu,
            "cpu.used": 30 * len(cpu),
            "disk.keys": disk,
            "disk.used": 30 * len(disk),
        }

    shared = hierarchy(["a"], ["a", "b"])
    assert "counted twice" in (_held(shared, 90) or "")
    assert _held(hierarchy(["a"], ["b"]), 90) is None
    # above the reference with a shared chunk, yet not every tier's bytes added up (a pinned
    # chunk counted again, say): no double count is proven
    assert _held(shared, 120) is None


def _two_running(cls: Any) -> Any:
    bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)
    sched = cls(bm, max_num_batched_tokens=10, max_num_seqs=4)
    sched.add(Sequence.from_prompt(0, [1, 2, 3], 4))
    sched.add(Sequence.from_prompt(1, [4, 5, 6, 7], 4))
    sched.step()
    sched.sequence(0).append_token(1)
    sched.sequence(1).append_token(1)
    return sched


def _budget_reading(cls: Any, mine: int) -> str | None:
    # the located call is run again on a copy: 2 tokens run from a budget of 10
    state: dict[str, Any] = {}
    d = Difference(
        "schedule_running",
        "",
        (BudgetStep(), 10),
        state,
        state,
        state,
        f"returned {mine}",
        "returned 8",
        _two_running(cls),
    )
    return token_budget_reading(d)


class _OneShort(Correct):  # type: ignore[misc]
    def schedule_running(self, out: Any, budget: int) -> int:
        return int(super().schedule_running(out, budget)) - 1


def test_a_budget_returned_wrong_is_called_twice_only_when_it_is_twice() -> None:
    assert _budget_reading(Correct, 8) is None
    assert "twice" in (_budget_reading(SpentTwice, 6) or "")
    one_short = _budget_reading(_OneShort, 7) or ""
    assert "return the budget left" in one_short and "twice" not in one_short


# Each cause below is stated only where yours, called again on a copy, proves it: shown on the
# slip it was written for, and kept back on a look-alike whose numbers meet its condition.

Final = checkpoint("token-budget", 3)
Chunked = checkpoint("token-budget", 2)


def _unlisted_hint(name: str) -> str:
    u = next(u for u in unlisted() if u.name == name)
    report, _ = failing_report(u.topic, u.impl, u.step)
    return str(report.hint)


def test_a_budget_charged_twice_is_told_so_only_when_a_longer_chunk_proves_it() -> None:
    sampled = next(u for u in unlisted() if u.name == "a sampled token charged").impl
    # two decodes from a budget of 10, yours returning 6: twice the tokens, and one token more
    # for each chunk that samples, alike; a chunk of three tokens tells them apart
    told = _budget_reading(sampled, 6) or ""
    assert "twice" not in told and "return the budget left, 10 less" in told
    hint = _unlisted_hint("a sampled token charged")
    assert "it took them from the budget twice" not in hint and "budget left" in hint


def test_a_miss_is_put_on_a_loop_of_wait_tries_only_when_a_retry_stores_it() -> None:
    assert "wait + 1 tries" in _unlisted_hint("retries count the first try")
    hint = _unlisted_hint("no victims taken for no room")
    assert "wait + 1 tries" not in hint and "that fits in the free bytes" in hint


class _CapOneShort(Chunked):  # type: ignore[misc,valid-type]
    def admit(self, out: Any, budget: int) -> None:
        if len(self.running) + 1 < self.max_num_seqs:
            super().admit(out, budget)


def _exact_fit(cls: Any) -> str | None:
    sched = cls(PrefixCachingBlockManager(16, 4), max_num_batched_tokens=10, max_num_seqs=2)
    sched.add(Sequence.from_prompt(0, [1, 2, 3], 4))
    sched.step()
    sched.add(Sequence.from_prompt(1, [5, 6, 7, 8], 4))  # needs 4, the budget given
    left, gone = {"waiting": [(1, 4)]}, {"waiting": []}
    d = Difference(
        "admit", "", (BudgetStep(), 4), left, left, gone, "returned None", "returned None", sched
    )
    return token_budget_reading(d)


def test_a_head_waiting_with_exactly_the_budget_is_an_exact_fit_only_when_one_more_admits() -> None:
    forgot = next(u for u in unlisted() if u.name == "a request needing exactly the budget waits")
    assert "exactly the budget left fits" in (_exact_fit(forgot.impl) or "")
    # the cap keeps it waiting, whatever the budget: no test with room to spare is proven
    assert "exactly the budget left fits" not in (_exact_fit(_CapOneShort) or "")


class _CountsSampledToken(Chunked):  # type: ignore[misc,valid-type]
    def admit(self, out: Any, budget: int) -> None:
        super().admit(out, budget)
        for c in out.scheduled:
            self.computed[c.seq.seq_id] += c.samples


def _computed_reading(cls: Any) -> str:
    sched = cls(PrefixCachingBlockManager(16, 4), max_num_batched_tokens=10, max_num_seqs=4)
    sched.add(Sequence.from_prompt(0, [1, 2, 3, 4], 2))
    before = {"num_computed_tokens": {0: 0}}
    mine, theirs = {"num_computed_tokens": {0: 5}}, {"num_computed_tokens": {0: 4}}
    d = Difference(
        "admit",
        "",
        (BudgetStep(), 5),
        before,
        mine,
        theirs,
        "returned None",
        "returned None",
        sched,
    )
    return token_budget_reading(d) or ""


def test_num_computed_tokens_is_put_on_the_budget_only_when_more_budget_moves_it() -> None:
    from servelab.grading.mistakes.token_budget.advance_by_budget import Buggy as ByBudget

    assert "advanced by the budget left" in _computed_reading(ByBudget)
    # 4 tokens ran from a budget of 5 and yours says 5: one for the sampled token, not the budget
    told = _computed_reading(_CountsSampledToken)
    assert "advanced by the budget" not in told and "start + num_tokens (4)" in told


def _full_pool(cls: Any) -> Any:
    """Three running requests of one full block each, one block free: each decode needs one."""
    sched = cls(BlockManager(num_blocks=4, block_size=2), max_num_batched_tokens=10)
    for i in range(3):
        sched.add(Sequence.from_prompt(i, [i + 1, i + 1], 4))
    sched.step()
    for i in range(3):
        sched.sequence(i).append_token(1)
    return sched


def _victims(cls: Any, mine: list[Any], theirs: list[Any]) -> str:
    before = {"running": [(0, 3), (1, 3), (2, 3)], "waiting": []}
    d = Difference(
        "schedule_running",
        "",
        (BudgetStep(), 10),
        before,
        {**before, "waiting": mine},
        {**before, "waiting": theirs},
        "returned 8",
        "returned 8",
        _full_pool(cls),
    )
    return token_budget_reading(d) or ""


class _ExtendAsksOneMore(Final):  # type: ignore[misc,valid-type]
    def extend(self, seq: Any, start: int, n: int) -> Any:
        if self.bm.blocks_needed(start + n + 1) - self.bm.blocks_needed(start) > self.bm.num_free:
            raise OutOfBlocks("room for the next token too")
        return super().extend(seq, start, n)


def test_victims_past_the_one_that_makes_room_are_told_only_when_no_retry_came_between() -> None:
    two = next(u for u in unlisted() if u.name == "a failed extend preempts two").impl
    assert "as well as [2]" in _victims(two, [(2, 3), (1, 3)], [(2, 3)])
    # yours retries after each victim, and asks for more room each time: not that rule
    assert "as well as" not in _victims(_ExtendAsksOneMore, [(2, 3), (1, 3)], [(2, 3)])


def test_the_same_victims_queued_in_another_order_are_no_other_victim() -> None:
    assert "the victim is the latest" in _victims(Final, [(1, 3)], [(2, 3)])
    assert "the victim is the latest" not in _victims(Final, [(1, 3), (2, 3)], [(2, 3), (1, 3)])


class _DropsRetriedChunk(Final):  # type: ignore[misc,valid-type]
    """Retries the request whose extend failed, and forgets to schedule its chunk."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i, retried = 0, False
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                self.preempt(self.running.pop(), out)
                retried = True
                continue
            if not retried:
                out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
                budget -= n
            self.computed[seq.seq_id] = start + n
            i, retried = i + 1, False
        return budget


def _skipped(cls: Any) -> str:
    victims = ["<sequence 2>"]
    mine = {"out.scheduled": [0], "out.preempted": victims}
    theirs = {"out.scheduled": [0, 1], "out.preempted": victims}
    d = Difference(
        "schedule_running",
        "",
        (BudgetStep(), 10),
        {},
        mine,
        theirs,
        "returned 9",
        "returned 8",
        _full_pool(cls),
    )
    return token_budget_reading(d) or ""


def test_a_request_skipped_after_a_preemption_is_not_retried_only_when_no_retry_came() -> None:
    no_retry = next(u for u in unlisted() if u.name == "no retry after preempting").impl
    assert "whose extend failed is retried" in _skipped(no_retry)
    assert "is retried" not in _skipped(_DropsRetriedChunk)


class _ReservesForNewcomers(Chunked):  # type: ignore[misc,valid-type]
    def step(self) -> Any:
        out = BudgetStep()
        self.retire(out)
        reserve = self.max_num_batched_tokens // 4
        budget = self.schedule_running(out, self.max_num_batched_tokens - reserve)
        out.num_running = len(out.scheduled)
        self.admit(out, budget + reserve)
        return out


def _starved(cls: Any) -> str:
    sched = cls(PrefixCachingBlockManager(16, 4), max_num_batched_tokens=8, max_num_seqs=4)
    sched.add(Sequence.from_prompt(0, [1, 2, 3], 4))
    sched.step()
    sched.sequence(0).append_token(1)
    sched.add(Sequence.from_prompt(1, list(range(10, 22)), 2))
    before = {"running": [(0, 4)], "num_computed_tokens": {0: 3, 1: 0}}
    mine = {"running": [(0, 4)], "num_computed_tokens": {0: 3, 1: 8}}
    theirs = {"running": [(0, 4)], "num_computed_tokens": {0: 4, 1: 7}}
    d = Difference("step", "", (), before, mine, theirs, "returned 1", "returned 2", sched)
    return token_budget_reading(d) or ""


def test_a_starved_decode_is_put_on_admitting_first_only_when_admit_runs_first() -> None:
    from servelab.grading.mistakes.token_budget.waiting_first import Buggy as WaitingFirst

    assert "starve the decodes" in _starved(WaitingFirst)
    assert "starve" not in _starved(_ReservesForNewcomers)


def test_a_copy_of_a_disk_tier_writes_and_deletes_in_a_folder_of_its_own() -> None:
    """A reading runs yours again on a deep copy: the copy of a disk tier, or of a hierarchy
    over one, holds its own copies of the chunk files, so a probe never touches yours."""
    final = checkpoint("kv-offload", 4)
    tier = final["DiskTier"](100)
    tier.put("a", b"a" * 60)
    twin = copy.deepcopy(tier)
    assert twin.root != tier.root and twin.get("a") == b"a" * 60
    assert twin.put("b", b"b" * 60) == [("a", b"a" * 60)]  # evicts 'a' in the copy alone
    assert tier.get("a") == b"a" * 60 and not tier.path("b").exists()
    h = final["Hierarchy"](10, 100)
    h.store("c", b"c" * 8)
    h.store("d", b"d" * 8)  # 'c' cascades into the disk tier
    twin_h = copy.deepcopy(h)
    twin_h.tiers[1].remove("c")
    assert h.tiers[1].get("c") == b"c" * 8 and twin_h.tiers[1].root != h.tiers[1].root


def _left_out(topic: str, name: str) -> str:
    """The hint for catalogue mistake ``name`` with it left out of the catalogue."""
    m = next(x for x in mistakes(topic) if x.name == name)
    undiagnosed = replace(load_topic(topic), diagnose=lambda program, impl: None)
    report, program = failing_report(undiagnosed, m.impl)
    others = [x for x in mistakes(topic) if x.name != name]
    return shown_hint(HOOKS[topic].explain(program, m.impl, None, others), report)


def test_a_write_cut_short_is_told_torn_only_when_the_chunk_s_own_file_is_short() -> None:
    # a copy of the disk tier has a folder of its own, so the crash is located in _write
    assert "a torn chunk under its final name" in _left_out("kv-offload", "torn_write")
    before = {"keys": ["a"], "files": {"a.chunk": 20}}
    whole = {"keys": ["a"], "files": {"a.chunk": 20, "b.chunk": 40}}
    raised = "raised SimulatedCrash"
    d = Difference("_write", "", ("b", b"b" * 40), before, whole, before, raised, raised, None)
    assert "torn" not in (kv_offload_reading(d) or "")


def test_an_admission_that_waits_for_the_whole_prompts_blocks_is_caught_at_its_step() -> None:
    slip = next(u for u in unlisted() if u.name == "admission waits for the whole prompt's blocks")
    report = failing_report("token-budget", slip.impl, slip.step)[0].text
    assert "✗ step 2 · a chunk needs only its own blocks" in report
    assert "where: the difference starts in your `admit`" in report
    assert "not of the whole prompt" in report  # the probe's rule, about `admit`


def test_a_release_that_empties_the_callers_list_is_told_what_it_changed() -> None:
    slip = next(u for u in unlisted() if u.name == "release empties the caller's found list")
    report = failing_report("kv-offload", slip.impl, slip.step)[0].text
    assert "✗ step 3 · a release drops its own pins" in report
    assert "first after h.release(first) is [], expected [('b', 0), ('c', 0)]" in report
    assert (
        "yours changed `found`, the list it was given: [('b', 0), ('c', 0)] -> []; "
        "the reference leaves it as it was"
    ) in report


def test_a_release_that_keeps_the_callers_list_is_not_told_it_changed_it() -> None:
    slip = next(u for u in unlisted() if u.name == "release unpins in the top tier only")
    report = failing_report("kv-offload", slip.impl, slip.step)[0].text
    assert "the list it was given" not in report


def test_a_recomputed_chunk_that_samples_once_past_the_prompt_is_caught() -> None:
    name = "a recomputed chunk samples once past the prompt"
    slip = next(u for u in unlisted() if u.name == name)
    report = failing_report("token-budget", slip.impl, slip.step)[0].text
    assert "✗ step 3 · a recomputed chunk samples only at the request's last token" in report
    assert "where: the difference starts in your `admit`" in report


def test_a_chunk_that_leaves_out_its_prefix_hit_is_caught() -> None:
    slip = next(u for u in unlisted() if u.name == "a prefix hit left out of the chunk")
    report = failing_report("token-budget", slip.impl, slip.step)[0].text
    assert "✗ step 2 · an admitted chunk reports its prefix hit" in report
    assert "with num_cached=0: an admitted chunk reports its hit" in report


def test_two_victims_queued_newest_first_are_caught_in_preempt() -> None:
    slip = next(u for u in unlisted() if u.name == "two victims queued newest first")
    report = failing_report("token-budget", slip.impl, slip.step)[0].text
    assert "✗ step 3 · two victims of one step come back oldest first" in report
    assert "where: the difference starts in your `preempt`" in report


def test_room_checked_against_the_whole_pool_is_caught_at_step_one() -> None:
    slip = next(u for u in unlisted() if u.name == "room checked against the whole pool")
    report = failing_report("block-manager", slip.impl, slip.step)[0].text
    assert "✗ step 1 · a request larger than the free blocks takes none" in report
    assert "where: the difference starts in your `allocate`" in report


def test_a_length_compared_with_zero_before_its_type_is_caught_in_allocate() -> None:
    slip = next(u for u in unlisted() if u.name == "the length compared with 0 before its type")
    report = failing_report("block-manager", slip.impl, slip.step)[0].text
    assert "`bm.allocate(1, '3')` raised TypeError" in report
    assert "where: the difference starts in your `allocate`" in report


def test_a_one_token_chunk_mid_prompt_that_samples_is_caught() -> None:
    slip = next(u for u in unlisted() if u.name == "a one-token chunk taken for a decode")
    report = failing_report("token-budget", slip.impl, slip.step)[0].text
    assert "✗ step 2 · a one-token chunk mid-prompt samples nothing" in report
    assert "where: the difference starts in your `schedule_running`" in report
