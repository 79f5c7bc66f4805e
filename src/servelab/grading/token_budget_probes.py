"""Token-budget probes for paths that only one ordering of calls reaches: a request that
waits while the cache changes under it."""

from __future__ import annotations

from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.readings.budget_slots import shared_slots
from servelab.grading.token_budget_hints import PROBE_HINTS
from servelab.grading.token_budget_script import CHUNKS, BudgetScript

__all__ = [
    "OWN_SLOTS",
    "REFUSED_UNCHANGED",
    "SEPARATE_SLOTS",
    "early_preemption",
    "hit_at_admission",
    "refused_admission_unchanged",
    "running_chunk_slots",
    "slots_per_chunk",
]


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


REFUSED_UNCHANGED = Hint(
    "an admission that OutOfBlocks refused ran nothing: the request stays at the head of "
    "waiting with its num_computed_tokens as it was (0 for a new request) until a chunk of it "
    "is scheduled",
    About(("admit",), ("num_computed_tokens",)),
)


def refused_admission_unchanged(impl: Any) -> None:
    """Request 1 needs 3 blocks and 1 is free: its admission is refused, and a refused
    admission records no progress (only a scheduled chunk moves num_computed_tokens)."""
    s = BudgetScript(impl, num_blocks=4, block_size=2, budget=16, prefix=True)
    s.add(0, [1, 2, 3, 4, 5, 6], 1)
    s.add(1, [11, 12, 13, 14, 15, 16], 1)
    s.expect(s.step(), [(0, 0, 6, True)], CHUNKS + " (request 1 needs 3 blocks, 1 is free)")
    s.expect(
        s.computed(1),
        0,
        "num_computed_tokens(1) after its admission was refused (no chunk of it ran)",
    )


OWN_SLOTS = Hint(
    "a running request's chunk carries the slots of the positions it computes, start .. "
    "start + n - 1 (self.slots(seq, start, n), once extend gave them blocks)",
    About(("schedule_running", "slots"), ("out.scheduled",)),
)


def running_chunk_slots(impl: Any) -> None:
    """Request 0's 3-token prompt fills slots 0-2 of block 0: its decode, position 3, writes
    slot 3. Only this field of a chunk tells where the token's KV goes."""
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=10)
    s.add(0, [1, 2, 3], 3)
    s.step()
    s.step(emit=False)
    got = [(c.seq.seq_id, c.start, list(c.slots)) for c in s.out.scheduled]
    s.expect(got, [(0, 3, [3])], "the decode as (seq_id, start, slots): position 3 of block 0")


SEPARATE_SLOTS = Hint(
    "each chunk carries a slots list of its own, those of its own positions: a new list per "
    "chunk (self.slots(seq, start, n) gives one), never one list kept and refilled for the "
    "next chunk",
    About(("admit", "schedule_running", "slots"), ("out.scheduled",)),
)


def slots_per_chunk(impl: Any) -> None:
    """Requests 0 and 1 are admitted in one step: each chunk carries the slots of its own
    prompt, in a list of its own (request 0 in block 0, request 1 in block 1)."""
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=10)
    s.add(0, [1, 2, 3], 3)
    s.add(1, [4, 5, 6, 7], 3)
    s.step(emit=False)
    chunks = list(s.out.scheduled)
    shared = shared_slots(s.sched, chunks)
    if shared is not None:
        if len(chunks) > 1 and chunks[0].slots is chunks[1].slots:
            s.note("out.scheduled[0].slots is out.scheduled[1].slots  # True")
        raise s.fail(f"yours gave {shared}")
    got = [(c.seq.seq_id, c.start, list(c.slots)) for c in chunks]
    want = [(sid, 0, _prompt_slots(s.bm, sid, n)) for sid, n in ((0, 3), (1, 4))]
    s.expect(got, want, "the chunks as (seq_id, start, slots), each where its table puts it")


def _prompt_slots(bm: Any, sid: int, n: int) -> list[int]:
    """The slots of positions 0 .. n - 1 of request ``sid`` where its block table puts them."""
    table = bm.block_table(sid)
    size = bm.block_size
    return [table[p // size] * size + p % size for p in range(n)]
