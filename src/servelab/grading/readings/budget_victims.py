"""What becomes of a victim after ``preempt`` within the same step, read from a re-run that
records your calls (kept even where the call ends by raising).

Each slip is named only where the record shows it: a request preempted earlier in the step
that ``schedule_running`` later extends again (a walk that still visits it: over a copy of
running), a request given room twice in one call with a preemption between (a walk that goes
back over requests already served), a victim left in running, a request that preempted
itself and still got a chunk, and a ``preempt`` that takes the victim off running when
``schedule_running`` has already popped it.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.budget import BudgetStep
from servelab.testing.expected_error import error_matches


def _recorded(
    subject: Any, method: str, args: tuple[Any, ...]
) -> tuple[list[tuple[str, Any, bool]], Any] | None:
    """Your ``method`` run again on a copy, each call of your ``extend`` and ``preempt``
    recorded in order with its request's id and whether that request was running then (an
    extend that found room recorded again as "room" once it returns), up
    to the end of the call or its raise, and the copy as the call left it; None when the
    copy or the record cannot be made."""
    calls: list[tuple[str, Any, bool]] = []
    try:
        obj = copy.deepcopy(subject)
        for name in ("extend", "preempt"):
            bound = getattr(obj, name)

            def record(*a: Any, _name: str = name, _bound: Any = bound) -> Any:
                sid = getattr(a[0], "seq_id", None) if a else None
                running = [getattr(s, "seq_id", None) for s in getattr(obj, "running", ())]
                calls.append((_name, sid, sid in running))
                result = _bound(*a)
                if _name == "extend":  # it found room
                    calls.append(("room", sid, sid in running))
                return result

            setattr(obj, name, record)
    except Exception:
        return None
    try:
        with line_budget(LINES_PER_CALL):
            getattr(obj, method)(*args)
    except (Exception, OutOfLines):
        pass
    return calls, obj


def victim_visited(d: Any) -> str | None:
    """``schedule_running`` extends a request it preempted earlier in the same call."""
    if len(d.args) != 2 or not isinstance(d.args[1], int):
        return None
    record = _recorded(d.subject, d.method, (BudgetStep(), d.args[1]))
    if record is None:
        return None
    calls, obj = record
    preempted: list[Any] = []
    kept: list[Any] = []  # extended again while still running, after its preempt
    served: dict[Any, int] = {}  # request -> preemptions seen when it first found room
    for name, sid, running_then in calls:
        if name == "preempt":
            preempted.append(sid)
        elif name == "room" and sid in served and len(preempted) > served[sid]:
            return (
                f"yours gave request {sid} room twice in one call (its extend found room, "
                f"then again after preempting request {preempted[-1]}): each running request "
                "gets one chunk a step. After a preemption, retry only the request whose "
                "extend failed, at the same index (the victim came off the end, so the "
                "requests before it did not move)"
            )
        elif name == "room":
            served.setdefault(sid, len(preempted))
        elif sid in preempted and running_then:
            kept.append(sid)
        elif sid in preempted:
            return (
                f"yours preempted request {sid}, then called extend for it later in the same "
                "call: a victim has left running and gets no chunk this step (it waits, "
                "recomputed from 0). Does yours walk a copy of running? Walk self.running "
                "itself, by index, as preemption shortens it"
            )
    running = [getattr(s, "seq_id", None) for s in getattr(obj, "running", None) or ()]
    kept = [sid for sid in preempted if sid in running] or kept
    kept = [sid for sid in kept if sid is not None]
    if kept:
        return (
            f"yours preempted request {kept[0]} and left it in running: a victim leaves "
            "running as it is preempted (victim = self.running.pop(), the latest), and "
            "gets no chunk this step"
        )
    return None


def removed_twice(d: Any) -> str | None:
    """Your ``preempt`` raised ValueError on a victim already off running, and run again on a
    copy where the victim is still last in running it takes the victim off running itself."""
    victim = d.args[0] if d.args else None
    sid = getattr(victim, "seq_id", None)
    if (
        sid is None
        or not d.i_raised
        or d.they_raised
        or not d.error("mine").startswith("ValueError")
    ):
        return None
    running = getattr(d.subject, "running", None)
    if not isinstance(running, list) or victim in running:
        return None
    try:
        obj = copy.deepcopy(d.subject)
        twin = copy.deepcopy(victim)
        obj.running.append(twin)
        with line_budget(LINES_PER_CALL):
            obj.preempt(twin, BudgetStep())
    except (Exception, OutOfLines):
        return None
    if any(getattr(s, "seq_id", None) == sid for s in obj.running):
        return None
    return (
        f"yours raised ValueError taking request {sid} off running, where it no longer is: "
        "schedule_running takes the victim off with running.pop() before it calls preempt "
        f"(run again with request {sid} still last in running, your preempt takes it off "
        "itself). Take it off in one place only: preempt frees its blocks, resets its "
        "computed tokens and queues it"
    )


def self_victim_ran(d: Any) -> str | None:
    """``schedule_running``, run again on a copy, preempted a request right after that
    request's own extend raised OutOfBlocks (the victim was the request asking), then still
    put a chunk of that request in out.scheduled."""
    if d.method != "schedule_running" or len(d.args) != 2 or not isinstance(d.args[1], int):
        return None
    out = BudgetStep()
    calls: list[tuple[str, Any, int]] = []  # (what, request id, chunks scheduled by then)
    try:
        obj = copy.deepcopy(d.subject)
        extend, preempt = obj.extend, obj.preempt

        def extend_seen(seq: Any, *a: Any) -> Any:
            sid = getattr(seq, "seq_id", None)
            try:
                return extend(seq, *a)
            except Exception as exc:
                if error_matches(exc, "OutOfBlocks"):  # no free block; other errors say nothing
                    calls.append(("failed", sid, len(out.scheduled)))
                raise

        def preempt_seen(victim: Any, *a: Any) -> Any:
            calls.append(("preempt", getattr(victim, "seq_id", None), len(out.scheduled)))
            return preempt(victim, *a)

        obj.extend, obj.preempt = extend_seen, preempt_seen
        with line_budget(LINES_PER_CALL):
            obj.schedule_running(out, d.args[1])
    except (Exception, OutOfLines):
        return None
    waiting = [getattr(s, "seq_id", None) for s in getattr(obj, "waiting", None) or ()]
    for (a, sid, _), (b, victim, k) in itertools.pairwise(calls):
        if a != "failed" or b != "preempt" or victim != sid or sid not in waiting:
            continue
        late = [c for c in list(out.scheduled)[k:] if c.seq.seq_id == sid]
        if not late:
            continue
        c = late[0]
        held = next((o for o in out.scheduled if o is not c and o.slots is c.slots), None)
        whose = "" if held is None else f", with request {held.seq.seq_id}'s slots list"
        return (
            f"yours preempted request {sid} right after its own extend found no free block "
            "(the victim was the request asking), then still scheduled a chunk for it "
            f"({c.num_tokens} token(s) from position {c.start}{whose}): a request that "
            "preempts itself goes back to waiting and runs nothing this step, no chunk and no "
            "computed tokens (the running phase ends there: return the budget left)"
        )
    return None
