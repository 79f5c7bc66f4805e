"""How a call moves a refcount, proven on copies: a fork or a hit that sets a block's count to
one value whatever it was before (where a new holder adds one), a fork that leaves the parent's
partial last block uncounted, a copy that takes over the shared block's count, a hit that takes
the evictable LRU's oldest entry off it instead of its own block. Each says what yours did, seen
in the call or on copies of the state before it, and the rule; none names a cause it did not
see."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from servelab.grading.readings.difference import SAME, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = [
    "claim_took_oldest",
    "copy_took_the_count",
    "count_set",
    "fork_left_partial",
    "shared_kept",
]

COUNT_SET = WrittenFor((SAME,), ("refcounts",))
"""A fork or a hit left a refcount at another value than one more than before."""
COPY_COUNT = WrittenFor((SAME,), ("refcounts",))
OLDEST_TAKEN = WrittenFor((SAME,), ("free", "reclaim order", "refcounts", "num_free"))
"""A hit took another block off the evictable LRU than its own."""

STARTS = (1, 2, 3, 4)
"""The counts a block is given on a copy before the call is made again."""


def _counts_after(
    d: Difference, blocks: list[Any], call: Callable[[Any], Any], start: int
) -> list[Any] | None:
    """``blocks``' refcounts after ``call`` on a copy of the state before the call, each of
    them set to ``start`` first; None where it cannot run."""
    try:
        obj = copy.deepcopy(d.subject)
        for b in blocks:
            obj.ref[b] = start
        with line_budget(LINES_PER_CALL):
            call(obj)
            return [obj.refcount(b) for b in blocks]
    except (Exception, OutOfLines):
        return None


def _fresh_id(d: Difference) -> Any:
    tables = d.before.get("tables", {})
    ids = [s for s in tables if type(s) is int]
    return max([*ids, *(a for a in d.args if type(a) is int)], default=0) + 1


def count_set(d: Difference) -> str | None:
    """A ``fork`` or ``_claim`` that leaves each block's refcount at one value, whatever it
    was: proven on copies where the block's count is set to 1, 2, 3 and 4 before the call is
    made again, and yours leaves it at the same value each time (the reference: one more)."""
    if d.method == "_claim" and d.args:
        blocks = [d.args[0]]
        child = None
    elif d.method == "fork" and len(d.args) > 1:
        blocks = list(dict.fromkeys(d.before.get("tables", {}).get(d.args[0], [])))
        child = _fresh_id(d)
    else:
        return None
    if not blocks or not all(type(b) is int for b in blocks):
        return None

    def again(obj: Any) -> Any:
        if child is None:
            return obj._claim(blocks[0])
        return obj.fork(d.args[0], child)

    seen = [_counts_after(d, blocks, again, k) for k in STARTS]
    if any(s is None for s in seen):
        return None
    if any(s != seen[0] for s in seen):
        return _count_by_start(d, blocks, seen)
    values = seen[0] or []
    if len(set(values)) != 1:
        return None
    value, b = values[0], blocks[0]
    if d.method == "_claim":
        what, rule = (
            f"`_claim({b})`",
            "a hit adds one holder to those the block has: its refcount goes up by one",
        )
    else:
        what, rule = (
            f"`fork({d.args[0]}, ...)`",
            "fork adds the child's table to the holders of each block: every refcount goes up "
            "by one",
        )
    where = f"block {b}" if len(blocks) == 1 else f"each of the parent's blocks {blocks}"
    return COUNT_SET.show(
        d,
        f"yours sets the count to {value} whatever it was: {what}, made again on copies with "
        f"the refcount of {where} set to {', '.join(map(str, STARTS[:-1]))} or {STARTS[-1]} "
        f"first, leaves it at {value} each time, where one more holder makes it "
        f"{', '.join(str(k + 1) for k in STARTS[:-1])} or {STARTS[-1] + 1}; {rule}",
    )


def fork_left_partial(d: Difference) -> str | None:
    """A ``fork`` that raised every refcount of the parent's table but the partial last
    block's: read off the call (the parent's length is not a multiple of the block size)."""
    if d.method != "fork" or len(d.args) < 2:
        return None
    parent = d.args[0]
    table = d.before.get("tables", {}).get(parent)
    n = d.before.get("lengths", {}).get(parent)
    size = getattr(d.subject, "block_size", 0)
    refs_before, refs = d.before.get("refcounts", {}), d.mine.get("refcounts", {})
    if not (isinstance(table, list) and len(table) > 1 and type(n) is int and size):
        return None
    if n % size == 0 or len(set(table)) != len(table):
        return None
    raised = [b for b in table if refs.get(b, 0) == refs_before.get(b, 0) + 1]
    last = table[-1]
    if raised != table[:-1] or refs.get(last) != refs_before.get(last):
        return None
    return COUNT_SET.show(
        d,
        f"yours raised the refcounts of the full blocks {raised} but left the partial last "
        f"block {last} at {refs.get(last)}, though the child's table holds it too: fork "
        "shares every block of the parent's table, the partial last one included, and raises "
        "each refcount by one (a write into it then sees refcount > 1 and copies it)",
    )


def copy_took_the_count(d: Difference) -> str | None:
    """An ``append_slot`` whose copy of a shared block was left at that block's count rather
    than 1: proven on copies where the shared block's count is 3 and 4 before the call, and
    the copy takes that count each time."""
    if d.method != "append_slot" or not d.args:
        return None
    source = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    new = re.search(r"block=(\d+)", d.returned("mine") or "")
    if not (source and new) or d.returned("mine") != d.returned("theirs"):
        return None
    src, block = int(source.group(1)), int(new.group(1))
    was = d.before.get("refcounts", {}).get(src)
    got = d.mine.get("refcounts", {}).get(block)
    if d.theirs.get("refcounts", {}).get(block) != 1 or got != was or got == 1:
        return None

    def again(obj: Any) -> Any:
        return obj.append_slot(d.args[0])

    for k in (3, 4):
        try:
            obj = copy.deepcopy(d.subject)
            obj.ref[src] = k
            with line_budget(LINES_PER_CALL):
                again(obj)
                if obj.refcount(block) != k:
                    return None
        except (Exception, OutOfLines):
            return None
    return COPY_COUNT.show(
        d,
        f"yours gave the copy, block {block}, the refcount the shared block {src} had before "
        f"the call ({was}; made again on copies where block {src}'s count is 3 or 4, the copy "
        "gets 3 or 4): a copy is a new block only the writer's table holds, so its refcount "
        "is 1, whatever the shared block's",
    )


def claim_took_oldest(d: Difference) -> str | None:
    """A ``_claim`` of an evictable block that took the evictable LRU's oldest entry off it
    and left the hit's own block there: read off the call."""
    if d.method != "_claim" or not d.args:
        return None
    block = d.args[0]
    before, mine = d.before.get("reclaim order"), d.mine.get("reclaim order")
    if not (isinstance(before, list) and isinstance(mine, list) and before):
        return None
    gone = [b for b in before if b not in mine]
    oldest = before[0]
    if gone != [oldest] or oldest == block or block not in mine:
        return None
    return OLDEST_TAKEN.show(
        d,
        f"yours took block {oldest}, the oldest entry of the evictable LRU, off it and left "
        f"the hit, block {block}, on it: a hit takes its own block off the evictable list "
        "(it is held again); the oldest entry leaves only when `_alloc` reclaims it",
    )


def shared_kept(d: Difference, block: Any) -> str | None:
    """A ``free_seq`` that left a shared ``block`` at its count, where the same call on a copy
    with that block's count set to 1 (this table its last holder) frees it: yours releases a
    block only when no other table holds it."""
    refs_before = d.before.get("refcounts", {})
    was = refs_before.get(block)
    if d.method != "free_seq" or not d.args or type(was) is not int or was < 2:
        return None
    if d.mine.get("refcounts", {}).get(block) != was:
        return None
    try:
        obj = copy.deepcopy(d.subject)
        obj.ref[block] = 1
        with line_budget(LINES_PER_CALL):
            obj.free_seq(d.args[0])
            freed = obj.refcount(block) == 0 and block in obj.free_list()
    except (Exception, OutOfLines):
        return None
    if not freed:
        return None
    dropped = [k for k in range(2, was + 2) if _count_after_free(d, block, k) == k - 1]
    if (
        dropped
        and dropped == list(range(2, was))
        and _count_after_free(d, block, was + 1) == (was + 1)
    ):
        return (
            f"yours left block {block}, which {was} tables held, at refcount {was}; made again "
            f"on copies where its count is 1 to {was + 1}, yours frees it at 1, drops it by "
            f"one at {_upto(was - 1)}, and leaves it at {was} and {was + 1}: yours releases a "
            f"block held by at most {was - 1} tables and skips one that more hold (after a "
            "fork of a fork). A table's entry is one reference whatever the count: release one "
            "per entry, and a block goes back to the free list when its count reaches 0"
        )
    return (
        f"yours left block {block}, which another table holds too, at refcount {was}: made "
        f"again on a copy where block {block}'s count is 1, it frees it; a table's entry is one "
        "reference whatever other tables hold the block: release one reference per table "
        "entry, shared blocks too (a block goes back to the free list when its count reaches 0)"
    )


def _upto(n: int) -> str:
    return "2" if n == 2 else f"2 to {n}"


def _count_after_free(d: Difference, block: Any, k: int) -> int | None:
    """``block``'s refcount after your ``free_seq`` (the call's own) on a copy where its count
    is ``k`` before the call; None where that cannot run."""
    try:
        obj = copy.deepcopy(d.subject)
        obj.ref[block] = k
        with line_budget(LINES_PER_CALL):
            obj.free_seq(d.args[0])
            got = obj.refcount(block)
    except (Exception, OutOfLines):
        return None
    return got if type(got) is int else None


def _count_by_start(d: Difference, blocks: list[Any], seen: list[Any]) -> str | None:
    """A ``fork`` whose refcounts, made again on copies from each count of :data:`STARTS`,
    are one value per start for every block, and not one more than the start each time: the
    counts yours leaves, beside one more holder's, with the rule; no cause is guessed."""
    if d.method != "fork" or any(len(set(values)) != 1 for values in seen):
        return None
    got = [values[0] for values in seen]
    if all(v == k + 1 for v, k in zip(got, STARTS, strict=True)):
        return None
    where = f"block {blocks[0]}" if len(blocks) == 1 else f"each of the parent's blocks {blocks}"
    return COUNT_SET.show(
        d,
        f"`fork({d.args[0]}, ...)`, made again on copies with the refcount of {where} set to "
        f"{', '.join(map(str, STARTS[:-1]))} or {STARTS[-1]} first, leaves it at "
        f"{', '.join(map(str, got[:-1]))} or {got[-1]}, where one more holder makes it "
        f"{', '.join(str(k + 1) for k in STARTS[:-1])} or {STARTS[-1] + 1}: fork adds the "
        "child's table to the holders of each block, whatever their number, so every "
        "refcount goes up by one",
    )
