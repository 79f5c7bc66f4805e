"""A request whose extend failed, left running as the latest: what a re-run on a copy shows
it did after the failure (no chunk, or a chunk of its own), and the rule it missed."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import BudgetStep


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def _after_failing(d: Difference, sid: Any) -> tuple[int, list[int]] | None:
    """Yours, run again on a copy: the token count of the last extend for request ``sid``
    that raised OutOfBlocks, and the sizes of the chunks yours scheduled for ``sid``, when
    yours calls preempt no more after that failure and ``sid`` is still running; None
    otherwise (nothing proven)."""
    calls: list[tuple[str, Any, bool, Any]] = []
    try:
        obj = copy.deepcopy(d.subject)
        for name in ("extend", "preempt"):
            bound = getattr(obj, name)

            def recorded(*a: Any, _name: str = name, _bound: Any = bound) -> Any:
                who = getattr(a[0], "seq_id", None) if a else None
                size = a[2] if len(a) > 2 else None
                try:
                    result = _bound(*a)
                except OutOfBlocks:
                    calls.append((_name, who, True, size))
                    raise
                calls.append((_name, who, False, size))
                return result

            setattr(obj, name, recorded)
        out = BudgetStep()
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(out, d.args[1])
    except (Exception, OutOfLines):
        return None
    failed = [i for i, c in enumerate(calls) if c[:3] == ("extend", sid, True)]
    if not failed or any(c[0] == "preempt" for c in calls[failed[-1] :]):
        return None
    if not any(getattr(s, "seq_id", None) == sid for s in obj.running):
        return None
    size = calls[failed[-1]][3]
    chunks = [
        c.num_tokens for c in out.scheduled if getattr(getattr(c, "seq", None), "seq_id", 0) == sid
    ]
    return (size if isinstance(size, int) else -1), chunks


def asker_kept(d: Difference) -> str | None:
    """The reference preempts a request whose extend failed when it is itself the latest
    running; yours left it running, last (proven by a re-run), with no chunk or with the
    chunk the re-run shows."""
    mine_r = _ids(d.mine.get("running"))
    waiting = _ids(d.before.get("waiting"))
    queued = [s for s in _ids(d.theirs.get("waiting")) if s not in waiting]
    kept = [s for s in queued if s in mine_r]
    if len(kept) != 1 or mine_r[-1:] != kept:
        return None
    seen = _after_failing(d, kept[0])
    if seen is None:
        return None
    size, chunks = seen
    rule = (
        "the victim is the latest running request even when it is the one whose extend "
        "failed (running.pop() takes it), and it goes back to waiting"
    )
    if not chunks:
        return (
            f"yours left request {kept[0]} running, the latest, after its extend found no free "
            f"block, with no chunk this step: {rule}"
        )
    if len(chunks) != 1:
        return None
    k = chunks[0]
    tried = f" of {size} token{'s' if size != 1 else ''}" if size > 0 else ""
    shrunk = ", never shrinking the chunk to what the free blocks hold" if 0 < k < size else ""
    return (
        f"yours ran a chunk of {k} token{'s' if k != 1 else ''} for request {kept[0]}, the "
        f"latest running, after its extend{tried} raised OutOfBlocks (seen on a copy): the "
        f"rule preempts the latest running request and retries{shrunk}; here the latest is "
        f"request {kept[0]} itself, so it runs no chunk this step and goes back to waiting"
    )
