"""The readings of kv-offload and token-budget speak only from what the located call shows.

Each rule is read from the evidence (what yours returned and changed beside the reference):
where the evidence does not show the rule broken, the reading says nothing, or states the
rule without the cause it cannot see.
"""

from __future__ import annotations

from typing import Any

from servelab.grading.mistakes.token_budget import Correct
from servelab.grading.mistakes.token_budget.budget_spent_twice import Buggy as SpentTwice
from servelab.grading.readings import Difference
from servelab.grading.readings.kv_offload import kv_offload_reading
from servelab.grading.readings.token_budget import token_budget_reading
from servelab.kv.budget import BudgetStep
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import Sequence


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


def test_held_bytes_above_the_reference_is_counted_twice_only_with_a_shared_chunk() -> None:
    def hierarchy(cpu: list[str], disk: list[str]) -> dict[str, Any]:
        return {"cpu.keys": cpu, "cpu.used": 30 * len(cpu), "disk.keys": disk}

    shared = hierarchy(["a"], ["a", "b"])
    d = Difference(
        "held_bytes", "Hierarchy", (), shared, shared, shared, "returned 90", "returned 60", None
    )
    assert "counted twice" in (kv_offload_reading(d) or "")
    apart = hierarchy(["a"], ["b"])
    d = Difference(
        "held_bytes", "Hierarchy", (), apart, apart, apart, "returned 90", "returned 60", None
    )
    assert kv_offload_reading(d) is None


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
