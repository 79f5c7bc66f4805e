"""Token-budget probes for paths that only one ordering of calls reaches: a request that
waits while the cache changes under it."""

from __future__ import annotations

from typing import Any

from servelab.grading.token_budget_hints import PROBE_HINTS
from servelab.grading.token_budget_script import CHUNKS, BudgetScript

__all__ = ["early_preemption", "hit_at_admission"]


def hit_at_admission(impl: Any) -> None:
    """Request 2 shares request 0's first block and is looked up in the first step (hit 2), but
    the pool cannot hold it. In the second step request 1 is retired and request 0's decode
    fills its second block [3, 1]: request 2 is admitted with a hit of 4, what the cache holds
    then, not what it held when request 2 was first looked up."""
    s = BudgetScript(impl, num_blocks=4, block_size=2, budget=16, prefix=True)
    s.add(0, [1, 2, 3], 3)
    s.add(1, [20, 21], 1)
    s.add(2, [1, 2, 3, 1, 5, 6], 1)
    s.expect(s.step(), [(0, 0, 3, True), (1, 0, 2, True)], CHUNKS + " (request 2 does not fit)")
    got = s.step()
    want = [(0, 3, 1, True), (2, 4, 2, True)]
    if got != want:
        raise s.fail(
            f"{CHUNKS} is {got}, expected {want}: request 2 waited a step; meanwhile request "
            "0's decode filled its block [3, 1], so at request 2's admission the cache holds 4 "
            "of its tokens (it held 2 when request 2 was first looked up)"
        )


# The reference's running requests as (num_computed_tokens, num_tokens) and its free blocks
# before each of the first four steps of the recompute probe (pool of 5 blocks of 2).
_RECOMPUTE_BEFORE = {
    1: ({}, 5),
    2: ({0: (3, 4)}, 3),
    3: ({0: (4, 5), 1: (2, 3)}, 2),
    4: ({0: (5, 6), 1: (3, 4)}, 0),
}


def early_preemption(s: BudgetScript, k: int) -> None:
    """In the recompute probe the reference preempts nobody before the fifth step; a
    preemption in step ``k`` < 5 is told with the new blocks the reference's running requests
    needed then, not with the recompute rule the probe was written for."""
    preempted = [v.seq_id for v in s.out.preempted]
    if not preempted:
        return
    running, free = _RECOMPUTE_BEFORE[k]
    size = 2
    need = sum(-(-end // size) - -(-start // size) for start, end in running.values())
    raise s.fail(
        f"preempted in step {k} is {preempted}, expected []: in the reference the running "
        f"requests' new tokens need {need} new blocks there and {free} are free, so nobody is "
        "preempted",
        hint=PROBE_HINTS["preempt-when-short"],
    )
