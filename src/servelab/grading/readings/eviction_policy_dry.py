"""A reading of an LFU pop_victim that raised IndexError where the reference raises NoVictim,
with entries in its heap when the call began: on copies, yours raises NoVictim for a heap empty
from the start, and runs its heap dry before the IndexError. Its empty-heap test does not
cover the heap its own pops empty."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["dry_heap"]


def _pop_on_copy(d: Difference, empty: bool) -> tuple[str, Any] | None:
    """The class of the error your pop_victim raises on a copy (its heap emptied first where
    ``empty``), and the copy's heap after it; None where it returns or cannot be read."""
    try:
        obj = copy.deepcopy(d.subject)
        if empty:
            obj.heap.clear()
        with line_budget(LINES_PER_CALL):
            obj.pop_victim()
    except OutOfLines:
        return None
    except Exception as e:
        return type(e).__name__, getattr(obj, "heap", None)
    return None


def dry_heap(d: Difference) -> str | None:
    """Yours raised IndexError, the reference NoVictim, with entries left in the heap."""
    if d.method != "pop_victim" or d.differ or not d.error("mine").startswith("IndexError"):
        return None
    if not d.error("theirs").startswith("NoVictim"):
        return None
    heap = getattr(d.subject, "heap", None)
    if not isinstance(heap, list) or not heap:
        return None
    dry, empty = _pop_on_copy(d, False), _pop_on_copy(d, True)
    if dry is None or empty is None or dry[0] != "IndexError" or dry[1] != []:
        return None
    if empty[0] != "NoVictim":
        return None
    n = len(heap)
    return (
        f"yours raised IndexError where the reference raises NoVictim: the heap held {n} "
        f"entr{'y' if n == 1 else 'ies'} when pop_victim began, none of them a candidate "
        "(pinned or stale). On copies, yours pops them all and then pops the empty heap, and "
        "raises NoVictim only where the heap is empty from the start: the empty-heap test "
        "comes before the pops, not between them. Test the heap on every turn of the loop "
        "(while self.heap: ...) and raise NoVictim once it runs dry"
    )
