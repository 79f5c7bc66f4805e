"""Grader topic ``token-budget``: the three graded steps of notebook 07.

The learner's class has the shape of :class:`~servelab.kv.budget.TokenBudgetScheduler`, over
the reference block managers (so a grade here depends only on the scheduler written in 07):

* ``TokenBudgetScheduler(bm, max_num_batched_tokens=b, max_num_seqs=c)``;
* ``add(seq)`` queues a :class:`~servelab.kv.scheduler.Sequence`; ``sequence(seq_id)`` and
  ``num_computed_tokens(seq_id)`` read a live request; ``waiting`` and ``running`` are readable
  sequences of ``Sequence`` objects;
* ``step()`` returns a :class:`~servelab.kv.budget.BudgetStep`: the running requests' chunks
  first (``num_running`` of them), then the admitted ones, each a
  :class:`~servelab.kv.budget.Chunk` ``(seq, start, num_tokens, slots, samples, num_cached)``.

Step 1 runs on the plain :class:`~servelab.kv.blocks.BlockManager` with whole-prompt
admission and a budget that holds any request; step 2 on the
:class:`~servelab.kv.prefix.PrefixCachingBlockManager` with chunks and prefix hits; both in a
pool that never runs out. Step 3 adds memory pressure: preemption by recompute. Between steps
the grader plays the engine, appending one token to each request whose chunk sampled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.token_budget_cached import HIT_BEFORE_ALLOCATE, hit_before_allocate
from servelab.grading.token_budget_hints import PROBE_HINTS
from servelab.grading.token_budget_probes import (
    OWN_SLOTS,
    REFUSED_UNCHANGED,
    SEPARATE_SLOTS,
    early_preemption,
    hit_at_admission,
    refused_admission_unchanged,
    running_chunk_slots,
    slots_per_chunk,
)
from servelab.grading.token_budget_replay import NAME, REPLAY
from servelab.grading.token_budget_script import CHUNKS, BudgetScript
from servelab.grading.topic import MachineCheck, Probe, ProbeFailed, Step, Topic
from servelab.testing.token_budget import INVARIANTS, token_budget_machine

__all__ = ["HINTS", "SHRINK_PROGRAMS", "TOPIC"]

#: Programs Hypothesis may run while shrinking one failure of this topic's machines: each
#: program drives a scheduler, a block manager and the model step for step (and drains them
#: at its end), so the topic-wide bound would take a failing grade past its CPU budget.
SHRINK_PROGRAMS = 250


HINTS: dict[str, Hint] = {
    "budget": Hint(
        "a step computes at most max_num_batched_tokens tokens: take each chunk's num_tokens "
        "from the budget once (not twice), and a prefix hit not at all (it is not computed)",
        About(("schedule_running", "admit"), ("out.scheduled",)),
    ).before(
        2,
        "a step computes at most max_num_batched_tokens tokens: take each chunk's "
        "num_tokens from the budget once (not twice)",
    ),
    # its own rule: a chunk of no token breaks none of the budget's charging rules above
    "nonempty": Hint(
        "a scheduled chunk runs at least one token: a request with no token to run in the "
        "step is not put in out.scheduled",
        About(("schedule_running", "admit"), ("out.scheduled",)),
    ),
    "cap": Hint(
        "`admit` only while len(running) < max_num_seqs",
        About(("admit",)),
    ),
    "running-first": Hint(
        "schedule_running first, in running order, then `admit` waiting ones into "
        "what is left of the budget: a long prompt must not starve the decodes",
        About(("schedule_running", "admit")),
    ),
    "fcfs": Hint(
        "`admit` is first come, first served: it takes the head of waiting, and stops at the "
        "first request it cannot admit (budget, cap or blocks); nobody behind it may overtake",
        About(("admit",)),
    ),
    "computed": Hint(
        "num_computed_tokens advances by the tokens that ran (start + n), never by the budget",
        About(("schedule_running", "admit"), ("num_computed_tokens",)),
    ),
    "slots": Hint(
        "allocate blocks for the chunk's tokens only (allocate token_ids[:hit + n] at "
        "admission, append_slot per token after), not for the whole prompt at the first chunk",
        About(("slots", "admit", "schedule_running"), ("tables", "lengths", "free", "num_free")),
    ).before(
        2,
        "allocate blocks for the tokens that run: the whole prompt at admission "
        "(allocate token_ids), append_slot per token after",
    ),
    "own-slots": SEPARATE_SLOTS,
    "preempted-idle": Hint(
        "a preempted request runs nothing in that step: when the victim is the request whose "
        "extend failed, it gets no chunk and no computed tokens (the running phase ends there)",
        About(("schedule_running",), ("out.scheduled", "num_computed_tokens")),
    ),
    "sample": Hint(
        "a chunk samples exactly when it reaches the end of the request's tokens "
        "(start + n == seq.num_tokens): the last chunk of a prompt samples its first token",
        About(("schedule_running", "admit")),
    ),
    "kv-slots": Hint(
        "a running request holds KV for its num_computed_tokens tokens; a preempted one gives "
        "its blocks back (bm.free_seq) and its num_computed_tokens is reset to 0",
        About(("preempt",), ("num_computed_tokens", "free", "num_free")),
    ).before(3, "a running request holds KV for its num_computed_tokens tokens"),
    "model": Hint(
        "the step differs from the rules: running first (each request the tokens it needs, cut "
        "to the budget), then waiting ones first come first served; preempt the latest running",
        About(),
    ).before(
        3,
        "the step differs from the rules: running first (each request the tokens it "
        "needs, cut to the budget), then waiting ones first come first served",
    ),
    "no-leak": Hint(
        "blocks went missing: free every block of finished and preempted requests",
        About(("preempt",), ("free", "num_free")),
    ).before(3, "blocks went missing: free every block of finished requests"),
    "liveness": Hint(
        "a request never finished: the oldest running request must get tokens in every step "
        "(running first, preempt the latest, admit first come, first served)",
        About(("schedule_running", "preempt", "admit")),
    ),
}


# --- step 1: the budget ---------------------------------------------------------------


def _running_first(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=10, prefix=True)
    s.add(0, [1, 2, 3], 4)
    s.add(1, [4, 5, 6, 7], 4)
    s.expect(s.step(), [(0, 0, 3, True), (1, 0, 4, True)], CHUNKS + " in the first step")
    s.add(2, [1] * 8, 2)
    got = s.step()
    want = [(0, 3, 1, True), (1, 4, 1, True), (2, 0, 8, True)]
    if got != want:
        raise _running_first_failure(s, got, want)


def _running_first_failure(
    s: BudgetScript, got: list[tuple[int, int, int, bool]], want: list[tuple[int, int, int, bool]]
) -> ProbeFailed:
    """The running-first probe's second step, told from what yours scheduled: the one-token
    rule only where a running request's chunk was not one token, the order only where the
    chunks are the reference's in another order; otherwise the place and the difference."""
    head = (
        f"{CHUNKS} is {got}, expected {want}: in the reference the running requests 0 and 1 "
        "decode one token each, in running order, then request 2's 8-token prompt takes the "
        "8 left of the budget of 10"
    )
    if sorted(got) == sorted(want):
        order = [c[0] for c in got]
        return s.fail(
            f"{head}; yours scheduled the same chunks in the order {order}",
            hint=PROBE_HINTS["running-order"],
        )
    running = [c for c in got if c[0] in (0, 1)]
    if any(n != 1 for _, _, n, _ in running):
        return s.fail(head, hint=PROBE_HINTS["one-token"])
    return s.fail(head, hint=PROBE_HINTS["no-rule"])


def _budget_bounds_the_step(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=10, prefix=True)
    s.add(0, [1] * 6, 2)
    s.add(1, [2] * 4, 2)
    s.add(2, [3], 2)
    got = s.step(emit=False)
    want = [(0, 0, 6, True), (1, 0, 4, True)]
    if got != want:
        head = (
            f"{CHUNKS} is {got}, expected {want}: in the reference requests 0 and 1 spend the "
            "budget of 10 (6 + 4 tokens), and request 2 waits"
        )
        spent = sum(n for _, _, n, _ in got if isinstance(n, int))
        if spent > 10:
            raise s.fail(f"{head}; yours computes {spent} tokens in the step", "budget")
        # within the budget: not the rule of charging it
        empty = any(n == 0 for _, _, n, _ in got)
        raise s.fail(head, hint=PROBE_HINTS["admit-spent" if empty else "no-rule"])
    s.expect(s.ids("waiting"), [2], "waiting")


def _spent_budget_ends_the_step(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=4)
    for sid in range(3):
        s.add(sid, [sid + 1], 4)
    s.step()
    s("sched.max_num_batched_tokens = 2  # a smaller budget from now on")
    s.expect(
        s.step(emit=False),
        [(0, 1, 1, True), (1, 1, 1, True)],
        CHUNKS + " (requests 0 and 1 spend the budget of 2: the step ends there, and "
        "request 2 gets no chunk, not one of 0 tokens)",
    )


def _cap(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=10, cap=2, prefix=True)
    for sid in range(3):
        s.add(sid, [sid + 1], 3)
    s.expect(s.step(), [(0, 0, 1, True), (1, 0, 1, True)], CHUNKS + " with max_num_seqs=2")
    s.expect(s.ids("waiting"), [2], "waiting")


def _computed_tokens(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=10, prefix=True)
    s.add(0, [1, 2, 3], 3)
    s.step()
    s.expect(s.computed(0), 3, "num_computed_tokens(0) after its 3-token prompt ran")
    s.step()
    s.expect(s.computed(0), 4, "num_computed_tokens(0) after one decode")


# --- step 2: chunked prefill ----------------------------------------------------------


def _prompt_in_chunks(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=4, prefix=True)
    s.add(0, list(range(10)), 2)
    s.expect(s.step(), [(0, 0, 4, False)], CHUNKS + " of a 10-token prompt, budget 4")
    s.expect(s.bm.seq_len(0), 4, "bm.seq_len(0): KV slots for the chunk that ran")
    s.expect(s.computed(0), 4, "num_computed_tokens(0)")
    s.expect(s.step(), [(0, 4, 4, False)], CHUNKS + " in the second step")
    s.expect(s.step(), [(0, 8, 2, True)], CHUNKS + " in the third step (the last chunk samples)")


def _advance_by_what_ran(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=8, prefix=True)
    s.add(0, [1, 2, 3], 2)
    s.expect(s.step(), [(0, 0, 3, True)], CHUNKS)
    s.expect(s.computed(0), 3, "num_computed_tokens(0) after 3 tokens ran in a budget of 8")


def _decodes_not_starved(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=6, prefix=True)
    s.add(0, [1, 2], 4)
    s.step()
    s.add(1, list(range(20)), 1)
    s.expect(
        s.step(),
        [(0, 2, 1, True), (1, 0, 5, False)],
        CHUNKS + " (request 0 decodes first; the 20-token prompt takes the 5 left)",
    )


def _prefix_hit_free(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=12, prefix=True)
    s.add(0, list(range(9)), 1)
    s.step()
    s.step()  # request 0 is retired: its two full blocks stay cached
    s.add(1, [*range(8), 50, 51], 1)
    s.add(2, [60, 61, 62], 1)
    s.expect(
        s.step(),
        [(1, 8, 2, True), (2, 0, 3, True)],
        CHUNKS + " (request 1 finds 8 tokens cached: it computes 2, and 10 are left for 2)",
    )


def _prefix_hit_reported(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=12, prefix=True)
    s.add(0, list(range(9)), 1)
    s.step()
    s.step()
    s.add(1, [*range(8), 50], 1)
    s.step()
    got = [(c.seq.seq_id, c.start, c.num_cached) for c in s.out.scheduled]
    s.expect(got, [(1, 8, 8)], "the admitted chunk as (seq_id, start, num_cached)")


def _one_token_mid_prompt(impl: Any) -> None:
    """Two decodes leave 1 of the budget to request 2's prompt: a one-token chunk that does
    not reach the end of the prompt is no decode and samples nothing."""
    s = BudgetScript(impl, num_blocks=16, block_size=4, budget=3, prefix=True)
    s.add(0, [1], 4)
    s.add(1, [2], 4)
    s.add(2, [3, 4, 5, 6, 7], 2)
    s.step()
    s.expect(
        s.step(),
        [(0, 1, 1, True), (1, 1, 1, True), (2, 1, 1, False)],
        CHUNKS + " (request 2's one token is 1 of its 5-token prompt)",
    )


def _admission_waits_for_blocks(impl: Any) -> None:
    """The pool holds the first prompt but not the second: admission stops on OutOfBlocks,
    and the second waits at the head of the queue (the third, which would fit, behind it)
    until the first is retired."""
    s = BudgetScript(impl, num_blocks=4, block_size=2, budget=16, prefix=True)
    s.add(0, [1, 2, 3, 4, 5, 6], 1)
    s.add(1, [11, 12, 13, 14, 15, 16], 1)
    s.add(2, [21, 22], 1)
    s.expect(s.step(), [(0, 0, 6, True)], CHUNKS + " (request 1 needs 3 blocks, 1 is free)")
    s.expect(s.ids("waiting"), [1, 2], "waiting after an admission stopped on OutOfBlocks")
    s.expect(s.step(), [(1, 0, 6, True), (2, 0, 2, True)], CHUNKS + " once request 0 is retired")


def _chunk_needs_its_own_blocks(impl: Any) -> None:
    """Two blocks are free after request 0's prompt: request 1's whole 6-token prompt needs
    three, its 2-token chunk one. A chunk asks the pool for its own blocks only."""
    s = BudgetScript(impl, num_blocks=4, block_size=2, budget=6, prefix=True)
    s.add(0, [1, 2, 3, 4], 3)
    s.add(1, [11, 12, 13, 14, 15, 16], 1)
    s.expect(
        s.step(),
        [(0, 0, 4, True), (1, 0, 2, False)],
        CHUNKS + " (request 1's first chunk of 2 needs 1 of the 2 free blocks)",
    )


def _shared_prefix_fits(impl: Any) -> None:
    """Request 0 still runs on the 8 tokens request 1 shares: one block is free, and request
    1's prompt needs only one block past its hit, so it is admitted."""
    s = BudgetScript(impl, num_blocks=4, block_size=4, budget=16, prefix=True)
    s.add(0, list(range(9)), 3)
    s.step()
    s.add(1, [*range(8), 50], 1)
    s.expect(
        s.step(),
        [(0, 9, 1, True), (1, 8, 1, True)],
        CHUNKS + " (request 1's 8 cached tokens sit in request 0's blocks: 1 new block of 1 free)",
    )


# --- step 3: allocation per step and preemption ---------------------------------------


def _pressure(impl: Any) -> BudgetScript:
    """Three 2-token prompts fill 3 of 4 blocks of 2; in the next step request 0 takes the
    last free block and request 1 finds none."""
    s = BudgetScript(impl, num_blocks=4, block_size=2, budget=8, prefix=True)
    for sid in range(3):
        s.add(sid, [10 * sid + 1, 10 * sid + 2], 3)
    s.step()
    return s


def _victim_latest(impl: Any) -> None:
    s = _pressure(impl)
    got = s.step()
    preempted = [v.seq_id for v in s.out.preempted]
    once = s.ids("waiting").count(2) == 1 and 2 not in s.ids("running")
    if preempted != [2] and set(preempted) == {2} and once:
        # the right victim, preempted once (the queues say so) and listed more than once
        raise s.fail(
            f"preempted is {preempted}, expected [2]: yours preempted request 2, the latest "
            f"running, as the reference does, and listed it {len(preempted)} times",
            hint=PROBE_HINTS["reported-once"],
        )
    s.expect(preempted, [2], "preempted (the latest running request is 2)")
    s.expect(got, [(0, 2, 1, True), (1, 2, 1, True)], CHUNKS)
    s.expect(s.ids("waiting"), [2], "waiting")


def _victim_latest_whatever_its_id(impl: Any) -> None:
    """As in :func:`_pressure`, with the ids added in falling order: the latest running request
    is the one added last (id 0 here), not the one with the highest id."""
    s = BudgetScript(impl, num_blocks=4, block_size=2, budget=8, prefix=True)
    for sid in (2, 1, 0):
        s.add(sid, [10 * sid + 1, 10 * sid + 2], 3)
    s.step()
    got = s.step()
    s.expect(
        [v.seq_id for v in s.out.preempted],
        [0],
        "preempted (ids added as 2, 1, 0: the latest running request is 0, whatever its id)",
    )
    s.expect(got, [(2, 2, 1, True), (1, 2, 1, True)], CHUNKS)


def _requeued_at_front(impl: Any) -> None:
    s = _pressure(impl)
    s.add(3, [31], 1)
    s.step()
    s.expect([v.seq_id for v in s.out.preempted], [2], "preempted")
    s.expect(s.ids("waiting"), [2, 3], "waiting (the victim goes back first, before request 3)")


def _two_victims_in_order(impl: Any) -> None:
    """Request 0's decode crosses into a new block with none free: request 2, then request 1,
    is preempted; each goes to the front of waiting, so 1 waits ahead of 2."""
    s = BudgetScript(impl, num_blocks=6, block_size=2, budget=4, prefix=True)
    s.add(0, [0, 1, 2, 3, 4], 4)
    s.add(1, [100, 101, 102], 3)
    s.step()
    s.step()
    s.add(2, [200, 201, 202], 1)
    s.step()
    s.step()
    s.expect([v.seq_id for v in s.out.preempted], [2, 1], "preempted (the latest first)")
    s.expect(s.ids("waiting"), [1, 2], "waiting (the victims back in their running order)")


def _preempted_restarts(impl: Any) -> None:
    s = _pressure(impl)
    s.step()
    s.expect(s.computed(2), 0, "num_computed_tokens(2) after its preemption")


def _recompute_in_chunks(impl: Any) -> None:
    s = BudgetScript(impl, num_blocks=5, block_size=2, budget=3)
    s.add(0, [1, 2, 3], 6)
    s.add(1, [5, 6, 7], 3)
    for k in range(1, 5):
        s.step()
        early_preemption(s, k)
    s.step()
    s.expect([v.seq_id for v in s.out.preempted], [1], "preempted in the fifth step")
    s.expect(s.step(), [(0, 7, 1, True), (1, 0, 2, False)], CHUNKS + " (request 1 comes back)")
    s.expect(
        s.step(),
        [(1, 2, 3, True)],
        CHUNKS + " (request 1 recomputes the rest of its 5 tokens: prompt and generated)",
    )


def _readmitted_past_the_prompt(impl: Any) -> None:
    """Request 1 (a 3-token prompt) has generated 2 tokens when it is preempted; it comes back
    with a chunk of 4 of its 5 tokens: past its prompt, short of its end, so it samples nothing."""
    s = BudgetScript(impl, num_blocks=5, block_size=2, budget=4)
    s.add(0, [1, 2, 3], 6)
    s.add(1, [5, 6, 7], 3)
    for _ in range(4):
        s.step()
    s.expect([v.seq_id for v in s.out.preempted], [1], "preempted in the fourth step")
    s.step()
    s.step()
    s.expect(
        s.step(),
        [(1, 0, 4, False)],
        CHUNKS + " (request 1 recomputes 4 of its 5 tokens: its prompt and 1 generated)",
    )


def _running_recompute_past_the_prompt(impl: Any) -> None:
    """Request 1 (a 3-token prompt, 2 generated) is preempted in the sixth step; on a budget of
    2 it is readmitted with tokens 0-1, then runs tokens 2-3: past its prompt, short of its end."""
    s = BudgetScript(impl, num_blocks=5, block_size=2, budget=2)
    s.add(0, [1, 2, 3], 5)
    s.add(1, [5, 6, 7], 3)
    for _ in range(6):
        s.step()
    s.expect([v.seq_id for v in s.out.preempted], [1], "preempted in the sixth step")
    s.expect(s.step(), [(1, 0, 2, False)], CHUNKS + " (request 1 comes back)")
    s.expect(s.step(), [(1, 2, 2, False)], CHUNKS + " (request 1 runs tokens 2-3 of its 5)")


def _budget_after_the_retry(impl: Any) -> None:
    """Called with a budget of 2: request 0 takes the last free block, request 1 finds none,
    request 2 is preempted and request 1's retry runs on the budget left (1 token). Through
    `step()` alone the retry's budget never runs short, so the probe calls the skeleton's
    `schedule_running` itself; a class without it (the reference package) has no such path."""
    if not hasattr(impl, "schedule_running"):
        return
    s = _pressure(impl)
    s("out = BudgetStep()")
    left = s("sched.schedule_running(out, 2)")
    got = [(c.seq.seq_id, c.start, c.num_tokens, c.samples) for c in s.out.scheduled]
    s.expect(got, [(0, 2, 1, True), (1, 2, 1, True)], CHUNKS + " of the running phase")
    s.expect(left, 0, "the budget schedule_running returned")


def _probe(name: str, hint_id: str, run: Callable[[Any], None]) -> Probe:
    return Probe(name, PROBE_HINTS.get(hint_id) or HINTS[hint_id], run)


def _machine(
    stage: int, name: str, invariants: list[str], examples: int, steps: int
) -> MachineCheck:
    return MachineCheck(
        name=name,
        build=lambda impl: token_budget_machine(
            impl, prefix_caching=stage > 1, name=NAME, stage=stage
        ),
        invariants=[INVARIANTS[i] for i in invariants],
        hints=HINTS,
        max_examples=examples,
        step_count=steps,
        shrink_programs=SHRINK_PROGRAMS,
    )


_ALL = [
    "budget",
    "nonempty",
    "cap",
    "running-first",
    "fcfs",
    "computed",
    "slots",
    "own-slots",
    "sample",
    "kv-slots",
    "model",
]

TOPIC = Topic(
    replay=REPLAY,
    checkpoint="token_budget",
    name="token-budget",
    title="The token-budget scheduler: running first, chunked prefill, preempt by recompute",
    steps=[
        Step(
            1,
            "the budget: running requests first, one token each, up to the budget and the cap",
            probes=[
                _probe("running requests go first, one token each", "one-token", _running_first),
                _probe("the budget bounds the step", "budget", _budget_bounds_the_step),
                _probe(
                    "a spent budget ends the step: no chunk of 0 tokens",
                    "spent",
                    _spent_budget_ends_the_step,
                ),
                _probe("at most max_num_seqs requests run", "cap", _cap),
                _probe("num_computed_tokens counts what ran", "computed", _computed_tokens),
                Probe("a decode writes its own position's slot", OWN_SLOTS, running_chunk_slots),
                Probe("each chunk carries its own slots", SEPARATE_SLOTS, slots_per_chunk),
            ],
            machine=_machine(
                1, "state machine: add and step, whole prompts", [*_ALL, "no-leak"], 80, 25
            ),
        ),
        Step(
            2,
            "chunked prefill: waiting requests take what is left, prefix hits count as computed",
            probes=[
                _probe("a long prompt runs in chunks over steps", "chunk", _prompt_in_chunks),
                _probe(
                    "num_computed_tokens advances by what ran, not by the budget",
                    "computed",
                    _advance_by_what_ran,
                ),
                _probe(
                    "a long prompt does not starve the decodes",
                    "running-first",
                    _decodes_not_starved,
                ),
                _probe("a prefix hit is not charged to the budget", "prefix", _prefix_hit_free),
                _probe(
                    "an admitted chunk reports its prefix hit", "hit-reported", _prefix_hit_reported
                ),
                Probe(
                    "num_cached is the hit found before the chunk's allocate",
                    HIT_BEFORE_ALLOCATE,
                    hit_before_allocate,
                ),
                _probe(
                    "a one-token chunk mid-prompt samples nothing", "sample", _one_token_mid_prompt
                ),
                _probe(
                    "a request the pool cannot hold stays waiting",
                    "blocks-wait",
                    _admission_waits_for_blocks,
                ),
                Probe(
                    "a refused admission records no progress",
                    REFUSED_UNCHANGED,
                    refused_admission_unchanged,
                ),
                _probe(
                    "a chunk needs only its own blocks",
                    "chunk-blocks",
                    _chunk_needs_its_own_blocks,
                ),
                _probe(
                    "a prefix hit held by a running request takes no free block",
                    "shared-prefix",
                    _shared_prefix_fits,
                ),
                _probe(
                    "a waiting request's prefix hit is looked up when it is admitted",
                    "hit-fresh",
                    hit_at_admission,
                ),
            ],
            machine=_machine(
                2,
                "state machine: add and step, chunks and prefix hits",
                [*_ALL, "no-leak"],
                80,
                25,
            ),
        ),
        Step(
            3,
            "allocation per step, preemption by recompute of the latest running request",
            probes=[
                _probe("the latest running request is the victim", "victim-latest", _victim_latest),
                _probe(
                    "the latest running request is the victim, whatever its id",
                    "victim-latest",
                    _victim_latest_whatever_its_id,
                ),
                _probe("the victim goes back to the front of waiting", "front", _requeued_at_front),
                _probe(
                    "two victims of one step come back oldest first",
                    "victims-order",
                    _two_victims_in_order,
                ),
                _probe("a preempted request restarts from zero", "reset", _preempted_restarts),
                _probe(
                    "a preempted request is recomputed in chunks, like a prompt",
                    "recompute",
                    _recompute_in_chunks,
                ),
                _probe(
                    "a recomputed chunk samples only at the request's last token",
                    "samples-at-end",
                    _readmitted_past_the_prompt,
                ),
                _probe(
                    "a running recomputed chunk samples only at the request's end",
                    "samples-at-end",
                    _running_recompute_past_the_prompt,
                ),
                _probe(
                    "the budget pays for what ran, not for a failed extend",
                    "retry-budget",
                    _budget_after_the_retry,
                ),
            ],
            machine=_machine(
                3,
                "state machine: add and step under memory pressure",
                [*_ALL, "preempted-idle", "no-leak", "liveness"],
                80,
                30,
            ),
        ),
    ],
)
