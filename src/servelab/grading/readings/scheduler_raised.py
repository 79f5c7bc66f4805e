"""Readings of a scheduler call that raised or misread the pool, each proven on copies: a fit
against the pool's size, a head taken out of waiting before an allocation that raised, an
index past the end of running once a victim was popped, victims queued by id."""

from __future__ import annotations

import copy
import traceback
from typing import Any

from servelab.grading.readings.budget_kept import FreeAsPool
from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.scheduler import StepOutput

__all__ = ["fits_counts_the_pool", "index_past_running", "requeued_by_id", "took_then_raised"]


def _ids(queue: Any) -> list[Any]:
    return [e[0] for e in queue if isinstance(e, tuple) and e] if isinstance(queue, list) else []


def _fits(obj: Any, n: Any) -> Any:
    try:
        with line_budget(LINES_PER_CALL):
            return ("returned", obj.fits(n))
    except (Exception, OutOfLines):
        return ("failed", None)


def fits_counts_the_pool(d: Difference) -> str | None:
    """fits said True where the reference says False; on a copy whose block manager reports
    its free count as num_blocks, yours says False too, and on a copy with every block free
    it agrees with the reference: yours reads the pool's size where the free count belongs."""
    if d.method != "fits" or len(d.args) != 1:
        return None
    if d.returned("mine") != "True" or d.returned("theirs") != "False":
        return None
    obj = copy.deepcopy(d.subject)
    bm = getattr(obj, "bm", None)
    free, pool = getattr(bm, "num_free", None), getattr(bm, "num_blocks", None)
    if not isinstance(free, int) or not isinstance(pool, int) or free == pool:
        return None
    obj.bm = FreeAsPool(bm)
    if _fits(obj, d.args[0]) != ("returned", False):
        return None
    return (
        f"yours admits with {free} of {pool} blocks free where the watermark stops it; on a "
        f"copy whose block manager reports num_blocks as its free count ({free}), yours "
        "refuses, as the reference does: yours counts the pool's size (bm.num_blocks) where "
        "the free blocks belong. Admit while bm.num_free - needed >= watermark"
    )


def took_then_raised(d: Difference, noun: str = "sequence") -> str | None:
    """admit raised where the reference returns, with a request of waiting left in neither
    waiting nor running: taken out of the queue before the call that raised."""
    if d.method != "admit" or not d.i_raised or d.they_raised:
        return None
    before = _ids(d.before.get("waiting"))
    mine_w, mine_r = _ids(d.mine.get("waiting")), _ids(d.mine.get("running"))
    lost = [s for s in before if s not in mine_w and s not in mine_r]
    theirs_w = _ids(d.theirs.get("waiting"))
    if len(lost) != 1 or lost[0] not in theirs_w:
        return None
    err = d.error("mine")
    return (
        f"yours took {noun} {lost[0]} out of waiting and then raised {err}, leaving it in "
        f"neither waiting nor running (the reference leaves it waiting): a call that raises "
        f"after taking it loses it. Test that it fits first, and stop (break) with it still "
        "at the head of waiting"
    )


def index_past_running(d: Difference) -> str | None:
    """decode raised IndexError after doing what the reference's decode does (no field
    differs), at a line that indexes running, with running shorter than when the call began:
    an index past its end once a victim was popped. Read from yours run again on a copy."""
    if d.method != "decode" or d.error("mine") != "IndexError" or d.they_raised or d.differ:
        return None
    before, after = _ids(d.before.get("running")), _ids(d.mine.get("running"))
    if len(after) >= len(before):
        return None
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            obj.decode(StepOutput())
    except IndexError as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.name == "decode"]
        line = (frames[-1].line or "") if frames else ""
        if str(exc) != "list index out of range" or "running[" not in line.replace(" ", ""):
            return None
    except (Exception, OutOfLines):
        return None
    else:
        return None
    popped = [s for s in before if s not in after]
    return (
        f"yours preempted {popped}, as the reference does, and then indexed running past its "
        f"end (`{line.strip()}`): running holds {len(after)} sequence(s) now, {len(before)} "
        "when the call began. A victim popped from running shortens it under the loop: walk "
        "while i < len(self.running), reading its length afresh each time"
    )


def _front_by_id(d: Difference) -> bool:
    """Proof of an order by id: on a copy whose waiting requests all take ids above the
    victim's, yours puts the victim first (a victim put at the back stays last)."""
    try:
        obj, victim = copy.deepcopy((d.subject, d.args[0]))
        top = max([victim.seq_id, *(s.seq_id for s in obj.waiting)]) + 1000
        for k, seq in enumerate(obj.waiting):
            seq.seq_id = top + k
        with line_budget(LINES_PER_CALL):
            obj.preempt(victim, StepOutput())
        return len(obj.waiting) > 1 and obj.waiting[0] is victim
    except (Exception, OutOfLines):
        return False


def requeued_by_id(d: Difference) -> str | None:
    """preempt left waiting in seq-id order where the reference's (arrival order) differs."""
    if d.method != "preempt" or d.i_raised or d.they_raised:
        return None
    mine, theirs = _ids(d.mine.get("waiting")), _ids(d.theirs.get("waiting"))
    if mine == theirs or sorted(mine, key=repr) != sorted(theirs, key=repr) or len(mine) < 2:
        return None
    try:
        ordered = mine == sorted(mine)
    except TypeError:
        return None
    victim = getattr(d.args[0], "seq_id", None) if d.args else None
    if not ordered or theirs[:1] != [victim] or mine[:1] == [victim] or not _front_by_id(d):
        return None
    return (
        f"yours left waiting as {mine}, in order of seq_id, where the reference's, in order "
        f"of arrival, is {theirs}: ids need not follow arrival. A victim goes to the front of "
        "waiting (appendleft), whatever its id"
    )
