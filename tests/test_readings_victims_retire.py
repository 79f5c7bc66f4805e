"""Victim and retire readings of the scheduler and token-budget topics state only what the
state proves: with two victims, the victim named is one the reference kept and "here" names
the reference's victims in the order taken; "never retires" needs the two steps run again on
a copy to have run."""

from __future__ import annotations

from typing import Any

from servelab import checkpoint
from servelab.grading.readings import Difference
from servelab.grading.readings.scheduler import scheduler_reading
from servelab.grading.readings.token_budget import token_budget_reading
from servelab.kv.blocks import BlockManager, OutOfBlocks
from servelab.kv.budget import BudgetStep, Chunk
from servelab.kv.scheduler import Decode, Sequence, StepOutput

Decoding = checkpoint("scheduler", 2)
Final = checkpoint("scheduler", 3)
BudgetFinal = checkpoint("token-budget", 3)


def _decode(gone_mine: list[int], gone_theirs: list[int]) -> str:
    """A decode call of four running sequences whose victims differ (in the order taken)."""
    before = {"running": [(s, 3) for s in range(4)], "waiting": []}

    def after(gone: list[int]) -> dict[str, Any]:
        return {
            "running": [(s, 3) for s in range(4) if s not in gone],
            "waiting": [(s, 3) for s in sorted(gone)],
            "out.preempted": gone,
        }

    d = Difference(
        "decode",
        "",
        (StepOutput(),),
        before,
        after(gone_mine),
        after(gone_theirs),
        "returned None",
        "returned None",
        Final(BlockManager(num_blocks=8, block_size=2), watermark=0),
    )
    return scheduler_reading(d) or ""


def test_a_scheduler_victim_is_named_with_the_reference_victims_in_the_order_taken() -> None:
    one = _decode([1], [3])
    assert "yours preempted sequence 1" in one and "running[-1] (3 here)" in one
    two = _decode([3, 1], [3, 2])
    assert "yours preempted sequence 1" in two, two
    assert "running[-1] (here 3, then 2)" in two, two
    assert "(2 here)" not in two  # sequence 2 was running[-1] only after 3 had gone


class _SparesTheLatest(BudgetFinal):  # type: ignore[misc,valid-type]
    """Preempts the request before the latest (running[-2]) while there are two or more."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop(-2 if len(self.running) > 1 else -1)
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                i = self.running.index(seq) if seq in self.running else i
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


def _full_pool(cls: Any = BudgetFinal) -> Any:
    """Three running requests of one full block each, one block free."""
    sched = cls(BlockManager(num_blocks=4, block_size=2), max_num_batched_tokens=10)
    for i in range(3):
        sched.add(Sequence.from_prompt(i, [i + 1, i + 1], 4))
    sched.step()
    for i in range(3):
        sched.sequence(i).append_token(1)
    return sched


def _budget_victims(
    mine: list[Any],
    theirs: list[Any],
    taken: tuple[list[int], list[int]] | None = None,
    cls: Any = BudgetFinal,
) -> str:
    before = {"running": [(0, 3), (1, 3), (2, 3)], "waiting": []}
    listed = ({"out.preempted": taken[0]}, {"out.preempted": taken[1]}) if taken else ({}, {})
    d = Difference(
        "schedule_running",
        "",
        (BudgetStep(), 10),
        before,
        {**before, "waiting": mine, **listed[0]},
        {**before, "waiting": theirs, **listed[1]},
        "returned 8",
        "returned 8",
        _full_pool(cls),
    )
    return token_budget_reading(d) or ""


def test_a_budget_victim_named_is_one_the_reference_kept() -> None:
    assert "yours preempted request 1; " in _budget_victims([(1, 3)], [(2, 3)])
    assert "(2 here)" in _budget_victims([(1, 3)], [(2, 3)])
    # yours took 0, then 2: waiting [2, 0]; the reference 2, then 1: waiting [1, 2]
    two = _budget_victims([(2, 3), (0, 3)], [(1, 3), (2, 3)])
    assert "yours preempted request 0; " in two, two
    assert "(here 2, then 1)" in two, two
    assert "yours preempted request 2" not in two


def test_a_budget_first_victim_is_named_only_where_both_lists_show_it() -> None:
    # yours took 1 alone; the reference 2, then 1: yours's first victim was not the latest,
    # as yours, run again, proves by calling preempt with request 1 first
    taken = _budget_victims([(1, 3)], [(1, 3), (2, 3)], ([1], [2, 1]), _SparesTheLatest)
    assert "yours preempted request 1 first" in taken and "(2 here)" in taken, taken
    # the same lists from a scheduler whose re-run takes the latest first: nothing proven
    listed = _budget_victims([(1, 3)], [(1, 3), (2, 3)], ([1], [2, 1]))
    assert "first, with" not in listed, listed
    # yours took the latest first and stopped short: no other victim to name
    short = _budget_victims([(2, 3)], [(1, 3), (2, 3)], ([2], [2, 1]))
    assert "first;" not in short
    assert "first;" not in _budget_victims([(1, 3)], [(1, 3), (2, 3)])  # no lists shown


class _RetiresWhatDecodeSaw(Decoding):  # type: ignore[misc,valid-type]
    """Retires a finished sequence only once a decode has seen it finished: late, not never."""

    def retire(self, out: Any) -> None:
        seen = getattr(self, "seen_done", set())
        for seq in [s for s in self.running if s.is_finished and s.seq_id in seen]:
            self.running.remove(seq)
            self.bm.free_seq(seq.seq_id)
            out.finished.append(seq)

    def decode(self, out: Any) -> None:
        self.seen_done = {s.seq_id for s in self.running if s.is_finished}
        for seq in self.running:
            out.decodes.append(Decode(seq, self.bm.append_slot(seq.seq_id)))


def _retire(cls: Any, num_blocks: int) -> str:
    """Sequence 0 finished, 1 running; with 4 blocks of 1 the pool has one block left, so
    a step run again without retiring 0 fails in its decode (no preemption at step 2)."""
    sched = cls(BlockManager(num_blocks=num_blocks, block_size=1), watermark=0)
    sched.add(Sequence.dummy(0, prompt_len=1, max_new_tokens=1))
    sched.add(Sequence.dummy(1, prompt_len=2, max_new_tokens=2))
    sched.step()
    for seq in sched.running:
        seq.append_token(1)
    before = {"running": [(0, 2), (1, 3)], "out.finished": []}
    theirs = {"running": [(1, 3)], "out.finished": [0]}
    d = Difference(
        "retire",
        "",
        (StepOutput(),),
        before,
        before,
        theirs,
        "returned None",
        "returned None",
        sched,
    )
    return scheduler_reading(d) or ""


def test_never_retires_is_said_only_where_the_steps_run_again_ran() -> None:
    # a roomy pool: the steps run again and prove late for the one, never for the other
    assert "only at a later step" in _retire(_RetiresWhatDecodeSaw, 16)
    assert "a scheduler that never retires" in _retire(_NeverRetires, 16)
    # a full pool: the steps run again fail, so neither is told it never retires
    tight = _retire(_RetiresWhatDecodeSaw, 4)
    assert "never retires" not in tight and "stay running at this step" in tight, tight
    assert "never retires" not in _retire(_NeverRetires, 4)


class _NeverRetires(Decoding):  # type: ignore[misc,valid-type]
    def retire(self, out: Any) -> None:
        return None
