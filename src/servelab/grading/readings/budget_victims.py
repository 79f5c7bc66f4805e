"""What becomes of a victim after ``preempt`` within the same step, read from a re-run that
records your calls (kept even where the call ends by raising).

Each slip is named only where the record shows it: a request preempted earlier in the step
that ``schedule_running`` later extends again (a walk that still visits it: over a copy of
running), a request given room twice in one call with a preemption between (a walk that goes
back over requests already served), a victim left in running, and a ``preempt`` that takes
the victim off running when ``schedule_running`` has already popped it.
"""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.budget import BudgetStep


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
