"""Readings of a token-budget step proven by running yours again on changed copies: a cap
that counts the step's chunks, a token of budget kept back, an allocation that leaves the
prefix hit out, a victim lost, a step's victims replaced, a fit against the pool's size."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from servelab.grading.readings.difference import Difference, call
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import BudgetStep

__all__ = [
    "FreeAsPool",
    "cap_counts_the_step",
    "checks_the_pool",
    "chunk_only_allocated",
    "kept_back",
    "victim_lost",
    "victims_replaced",
]

Again = Callable[[int], "tuple[list[Any], Any, Any] | None"]


def _ids(queue: Any) -> list[Any]:
    return [e[0] for e in queue if isinstance(e, tuple) and e] if isinstance(queue, list) else []


def _shown_ids(shown: Any) -> list[Any]:
    """Entries of an output list as shown (``<sequence 2>`` or an id), as ids."""
    if not isinstance(shown, list):
        return []
    return [str(e).removeprefix("<sequence ").removesuffix(">") for e in shown]


def _admits(obj: Any, out: Any, budget: int, sid: Any) -> bool | None:
    """Whether your admit, on ``obj`` with ``out``, takes request ``sid`` out of waiting."""
    try:
        with line_budget(LINES_PER_CALL):
            obj.admit(out, budget)
    except (Exception, OutOfLines):
        return None
    return all(s.seq_id != sid for s in obj.waiting)


def cap_counts_the_step(d: Difference) -> str | None:
    """The head left waiting with room under the cap, where the step already holds chunks.
    Proof, by two runs of yours on copies: with an empty out.scheduled it admits the head, and
    with the same out.scheduled and max_num_seqs raised by its length it admits it too. A
    budget read from out.scheduled passes the first and fails the second."""
    if d.method != "admit" or len(d.args) != 2 or d.i_raised or d.they_raised:
        return None
    out, budget = d.args
    waiting, running = getattr(d.subject, "waiting", None), getattr(d.subject, "running", None)
    cap = getattr(d.subject, "max_num_seqs", None)
    scheduled = list(getattr(out, "scheduled", None) or ())
    if not waiting or not isinstance(running, list) or not isinstance(cap, int) or not scheduled:
        return None
    head = waiting[0].seq_id
    if _ids(d.mine.get("waiting"))[:1] != [head] or _ids(d.theirs.get("waiting"))[:1] == [head]:
        return None
    if not len(running) < cap <= len(running) + len(scheduled):
        return None
    if _admits(copy.deepcopy(d.subject), BudgetStep(), budget, head) is not True:
        return None
    obj, kept = copy.deepcopy((d.subject, scheduled))
    obj.max_num_seqs = cap + len(kept)
    step = BudgetStep()
    step.scheduled.extend(kept)
    if _admits(obj, step, budget, head) is not True:
        return None
    return (
        f"yours left request {head} waiting with {len(running)} running and max_num_seqs = "
        f"{cap}; run again with out.scheduled empty, or with max_num_seqs raised by the "
        f"{len(scheduled)} chunks already in it, yours admits it: yours counts the step's "
        "chunks against the cap, so each running request counts twice. The cap is on the "
        "requests running: admit while len(running) < max_num_seqs"
    )


def kept_back(d: Difference, chunks: list[Any], again: Again) -> str | None:
    """A cut chunk one token short of the budget left, and one short again on copies with one
    and two more tokens of budget: a token kept back whenever a chunk is cut."""
    if d.method != "admit" or len(d.args) != 2:
        return None
    left = d.args[1]
    for c in chunks:
        need = c.seq.num_tokens - c.start
        if need > left and c.num_tokens == left - 1:
            sizes = []
            for more in (1, 2):
                ran = again(d.args[1] + more)
                got = [x.num_tokens for x in (ran[0] if ran else ()) if x.seq is not None]
                ids = [x.seq.seq_id for x in (ran[0] if ran else ())]
                if c.seq.seq_id not in ids or need <= left + more:
                    return None
                sizes.append(got[ids.index(c.seq.seq_id)])
            if sizes != [left, left + 1]:
                return None
            return (
                f"yours gave request {c.seq.seq_id} {c.num_tokens} of its {need} tokens to "
                f"run with {left} of the budget left, and on copies with {left + 1} and "
                f"{left + 2} left, {sizes[0]} and {sizes[1]}: yours keeps one token of the "
                "budget back whenever it cuts a chunk. The budget is for the tokens that run; "
                "a cut chunk samples nothing and no sampled token is charged: a chunk takes "
                "min(tokens still to run, budget left)"
            )
        left -= c.num_tokens
    return None


def chunk_only_allocated(d: Difference) -> str | None:
    """Yours raised where the reference admits, after allocating the head the chunk's
    token count alone, where its table holds the prefix hit and the chunk (hit + n)."""
    if d.method != "admit" or not d.i_raised or d.they_raised or len(d.args) != 2:
        return None
    waiting = getattr(d.subject, "waiting", None)
    if not waiting:
        return None
    head = waiting[0]
    hit = call(copy.deepcopy(d.subject), "cached_tokens", head)
    if not isinstance(hit, int) or hit < 1:
        return None
    n = min(head.num_tokens - hit, d.args[1])
    mine, theirs = d.mine.get("lengths"), d.theirs.get("lengths")
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return None
    if mine.get(head.seq_id) != n or theirs.get(head.seq_id) != hit + n or n == hit + n:
        return None
    return (
        f"yours allocated request {head.seq_id} {n} tokens, its chunk's count, where it "
        f"holds its prefix hit ({hit} tokens) and its chunk: {hit + n} tokens. Its chunk's "
        f"positions {hit} .. {hit + n - 1} then lie past its table, and yours raised "
        f"{d.error('mine')} reading their slots: allocate token_ids[:hit + n], the hit's "
        "cached blocks first"
    )


def victim_lost(d: Difference, noun: str = "request") -> str | None:
    """A victim whose blocks yours freed, left in neither running nor waiting."""
    if d.method != "preempt" or not d.args or d.i_raised:
        return None
    victim = getattr(d.args[0], "seq_id", None)
    tables = d.mine.get("tables")
    mine_w, mine_r = _ids(d.mine.get("waiting")), _ids(d.mine.get("running"))
    if victim is None or victim in mine_w or victim in mine_r:
        return None
    if victim not in _ids(d.theirs.get("waiting")) or not isinstance(tables, dict):
        return None
    if victim in tables or not d.differ <= {"waiting", "num_computed_tokens"}:
        return None  # only where the victim is, nothing else, differs
    computed = d.mine.get("num_computed_tokens")
    if isinstance(computed, dict) and victim in computed:
        return None
    return (
        f"when your preempt returns, {noun} {victim}'s blocks are freed and it is in neither "
        f"running nor waiting; the reference's puts it at the front of waiting (appendleft) "
        f"there: a {noun} left out of both queues is never scheduled again, unless your code "
        f"puts it back later. A preempted {noun} waits again, to be recomputed from the start"
    )


def victims_replaced(d: Difference, noun: str = "request") -> str | None:
    """out.preempted left holding this call's victim alone, where it held others before."""
    if d.method != "preempt" or not d.args:
        return None
    victim = str(getattr(d.args[0], "seq_id", None))
    before, mine = (
        _shown_ids(d.before.get("out.preempted")),
        _shown_ids(d.mine.get("out.preempted")),
    )
    theirs = _shown_ids(d.theirs.get("out.preempted"))
    if not before or mine != [victim] or theirs != [*before, victim]:
        return None
    return (
        f"yours left `out.preempted` as [{victim}] where it held [{', '.join(before)}] before the "
        "call: the "
        f"step's earlier victims are dropped from it. Add each victim to the list "
        f"(out.preempted.append), so the step reports every {noun} that lost its blocks"
    )


class FreeAsPool:
    """A block manager that answers ``num_blocks`` with its free count, all else its own."""

    def __init__(self, bm: Any) -> None:
        self._bm = bm

    @property
    def num_blocks(self) -> Any:
        return self._bm.num_free

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bm, name)


def checks_the_pool(d: Difference) -> str | None:
    """extend raised OutOfBlocks after appending; on a copy whose block manager reports its
    free count as num_blocks, yours raises before appending anything."""
    if d.method != "extend" or d.error("mine") != "OutOfBlocks" or len(d.args) != 3:
        return None
    if d.error("theirs") != "OutOfBlocks" or d.changed("theirs") or "lengths" not in d.differ:
        return None
    seq, start, n = d.args
    sid = getattr(seq, "seq_id", None)
    try:
        obj = copy.deepcopy(d.subject)
        before = obj.bm.seq_len(sid)
        free, pool = obj.bm.num_free, obj.bm.num_blocks
        obj.bm = FreeAsPool(obj.bm)
        with line_budget(LINES_PER_CALL):
            obj.extend(obj.sequence(sid), start, n)
    except OutOfBlocks:
        if obj.bm.seq_len(sid) != before:
            return None
    except (Exception, OutOfLines):
        return None
    else:
        return None
    mine = d.mine.get("lengths")
    held = mine.get(sid) if isinstance(mine, dict) else None
    return (
        f"yours appended to request {sid} ({before} tokens, {held} after) before "
        f"OutOfBlocks stopped it, with {free} block(s) free; on a copy whose block manager "
        f"reports num_blocks as its free count ({free}, not {pool}), yours raises before "
        "appending anything: yours compares the new blocks with the pool's size, where the "
        "free blocks belong (need > bm.num_free)"
    )
