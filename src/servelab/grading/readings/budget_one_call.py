"""A chunked ``admit`` that takes one waiting request per call, with a proof.

The reference admits from the head of waiting while the budget, max_num_seqs and the blocks
allow: several requests in one step when they fit. One cause of admitting fewer is named here
only where re-runs show it: your ``admit``, run again on a copy with a budget large enough for
every waiting request, still admits one request, and called once more from the state it
leaves, admits the next one (so neither the cap nor the pool stopped it the first time).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.budget import BudgetStep

Rerun = Callable[[int], "tuple[list[Any], Any, Any] | None"]


def _admitted(chunks: list[Any], waiting: list[Any]) -> list[Any]:
    return [c.seq.seq_id for c in chunks if c.seq.seq_id in waiting]


def _once_more(obj: Any, budget: int) -> list[Any] | None:
    """The chunks of your admit called again on a copy of ``obj``, with a fresh step."""
    try:
        again = copy.deepcopy(obj)
        out = BudgetStep()
        with line_budget(LINES_PER_CALL):
            again.admit(out, budget)
    except (Exception, OutOfLines):
        return None
    return list(out.scheduled)


def one_per_call(subject: Any, budget: Any, theirs_running: Any, rerun: Rerun) -> str | None:
    """The sentence for an admit that takes one request per call, or None.

    ``subject`` is a copy of your scheduler before the call with ``budget``;
    ``theirs_running`` the running requests the reference leaves, as (id, tokens) entries;
    ``rerun(b)`` your call again on a copy with budget ``b`` (chunks, returned, the copy)."""
    waiting = [s.seq_id for s in getattr(subject, "waiting", None) or ()]
    running = {s.seq_id for s in getattr(subject, "running", None) or ()}
    if not isinstance(budget, int) or not isinstance(theirs_running, list) or len(waiting) < 2:
        return None
    theirs = [entry[0] for entry in theirs_running if entry[0] not in running]
    if len(theirs) < 2:
        return None  # the reference took one too: nothing to tell
    big = budget + sum(s.num_tokens for s in subject.waiting)
    ran = rerun(big)
    if ran is None or _admitted(ran[0], waiting) != waiting[:1]:
        return None
    more = _once_more(ran[2], big)
    if more is None or _admitted(more, waiting) != waiting[1:2]:
        return None
    return (
        f"yours admits one request per call: run again on a copy with a budget of {big}, "
        f"enough for every waiting request, it admits request {waiting[0]} alone, and called "
        f"once more from the state it leaves, it admits request {waiting[1]}; the reference "
        f"admitted {theirs} in this call: admit keeps taking the head of waiting while the "
        "budget, max_num_seqs and the blocks allow"
    )
