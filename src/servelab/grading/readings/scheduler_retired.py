"""A retire that fills a finished sequence's place in running with the last running sequence.

The call's own states show it: yours left running exactly as moving the last sequence into
each finished one's place leaves it, and that order is neither the reference's nor the
reference's reversed (with one sequence left beside the one moved, the two read alike, and
nothing is said of how)."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def _swapped(before: list[Any], gone: set[Any]) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """``before`` with each of ``gone`` replaced by the last sequence (popped): the order left
    and the (moved, replaced) pairs, in the order they happened."""
    left, moves, i = list(before), [], 0
    while i < len(left):
        if left[i] in gone:
            last = left.pop()
            if i < len(left):
                moves.append((last, left[i]))
                left[i] = last
        else:
            i += 1
    return left, moves


def moved_the_last_in(d: Difference) -> str | None:
    """Yours left running as a retire that moves the last sequence into each finished one's
    place leaves it, where the reference keeps the rest in their order."""
    before = _ids(d.before.get("running"))
    mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
    gone = {s for s in before if s not in theirs}
    if not gone or mine == theirs or sorted(mine, key=repr) != sorted(theirs, key=repr):
        return None
    left, moves = _swapped(before, gone)
    if left != mine or not moves or left == theirs[::-1]:
        return None
    moved = ", then ".join(
        f"sequence {m} was moved from the end of running into finished sequence {f}'s place"
        for m, f in moves
    )
    return (
        f"yours left running as {mine}, not {theirs}: {moved} (a swap-remove), and the order "
        "of arrival is lost; retire drops the finished ones and keeps the rest in their "
        "order, oldest first, for decode to take in that order"
    )
