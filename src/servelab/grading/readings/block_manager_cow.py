"""A copy-on-write that dropped the shared block's refcount by more than one, read again on a
copy with one more holder: the writer holds the shared block once, so it releases it once."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from servelab.grading.readings.difference import SAME, VALUE, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

OVER_RELEASED = WrittenFor((SAME,), ("refcounts", "free", "num_free"))
"""The same slot returned; the shared block's refcount (and the free list) went further."""


def _refcount_after(d: Difference, seq: Any) -> int | None:
    """The shared block's refcount after yours copies it for ``seq`` on a copy where one more
    sequence (a fork of ``seq``) holds it; None when that cannot run."""
    tables = d.before.get("tables", {})
    ids = [s for s in tables if isinstance(s, int)]
    if not ids:
        return None
    fresh = max(ids) + 1
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            obj.fork(seq, fresh)
            slot = obj.append_slot(seq)
            got = obj.refcount(slot[2]) if slot[2] is not None else None
    except Exception:
        return None
    except OutOfLines:
        return None
    return got if isinstance(got, int) else None


def over_released_reading(d: Difference) -> str | None:
    """Yours and the reference copied the same shared block into the same slot, and yours left
    the shared block's refcount lower: dropped by ``k`` > 1 where the writer held it once. The
    cause is stated only when, with one more holder, the same call drops it by ``k`` again
    (released ``k`` times) or to 0 again (freed whatever held it)."""
    if d.method != "append_slot" or not d.args or d.returned("mine") != d.returned("theirs"):
        return None
    source = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    refs: Mapping[Any, Any] = d.before.get("refcounts", {})
    if source is None or not isinstance(refs, Mapping):
        return None
    shared, seq = int(source.group(1)), d.args[0]
    held, mine = refs.get(shared), d.mine.get("refcounts", {}).get(shared, 0)
    theirs = d.theirs.get("refcounts", {}).get(shared, 0)
    if not (isinstance(held, int) and isinstance(mine, int) and theirs == held - 1 > mine):
        return None
    drop = held - mine
    again = _refcount_after(d, seq)
    if again is None:
        return None
    others = held - 1
    if again == held + 1 - drop and drop == 2:
        said = (
            f"after copying, yours dropped the shared block {shared}'s refcount by 2 ({held} "
            f"-> {mine}), and by 2 again when one more sequence held it, as a release made "
            "twice would: the writer holds it once, so its refcount falls by one, and the "
            f"{others} other {'holder keeps' if others == 1 else 'holders keep'} it"
        )
    elif again == 0 and mine == 0:
        said = (
            f"after copying, yours dropped the shared block {shared} to refcount 0 ({held} -> "
            "0), and to 0 again when one more sequence held it: the writer drops only its own "
            f"reference (the refcount falls by one), and the {others} other "
            f"{'holder keeps' if others == 1 else 'holders keep'} it"
        )
    else:
        return None
    return OVER_RELEASED.show(d, said)


def copy_given_back(d: Difference, block: int) -> str | None:
    """A copy-on-write whose copy ``block`` went from the left end of the free list to its
    right end at refcount 0 (taken, then given back) while the writer's table holds it, and
    the shared block it copies fell by exactly one: both blocks released, read off the
    fields alone."""
    seq = d.args[0] if d.args else None
    source = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    before, after = d.before.get("free"), d.mine.get("free")
    refs, mine = d.before.get("refcounts", {}), d.mine.get("refcounts", {})
    if source is None or not isinstance(before, list) or not isinstance(after, list):
        return None
    shared = int(source.group(1))
    held = refs.get(shared) if isinstance(refs, Mapping) else None
    if len(before) < 2 or before[0] != block or after != [*before[1:], block]:
        return None  # one free block: a copy never taken off the list looks the same
    if not isinstance(held, int) or mine.get(shared) != held - 1 or mine.get(block):
        return None
    return (
        f"yours took block {block} for the copy and gave it back: it is at the right end of "
        f"the free list at refcount 0 while sequence {seq}'s table holds it, and the shared "
        f"block {shared} fell by one ({held} -> {held - 1}), as it should. After copying, only "
        "the shared block (cow_src) is released; the copy stays held, at refcount 1"
    )


def _copies_with(d: Difference, counts: Mapping[int, int]) -> bool | None:
    """Whether your ``append_slot`` (the call's own) copies, on a copy of the state where the
    blocks of ``counts`` have those refcounts; None where it cannot run."""
    try:
        obj = copy.deepcopy(d.subject)
        for block, k in counts.items():
            obj.ref[block] = k
        with line_budget(LINES_PER_CALL):
            slot = obj.append_slot(*d.args)
        return slot[2] is not None
    except (Exception, OutOfLines):
        return None


def copy_decided_by_other(d: Difference, block: int) -> str | None:
    """Yours copied the last block ``block`` that only the writer holds, while another block
    of its table is shared. Said only when, on copies, yours copies exactly as that other
    block's count says (shared: copies; held once: writes in place, even where ``block`` is
    shared): the decision reads the wrong entry of the table."""
    seq = d.args[0] if d.args else None
    table = d.before.get("tables", {}).get(seq)
    refs = d.before.get("refcounts", {})
    if not isinstance(table, list) or len(table) < 2 or table[-1] != block:
        return None
    for j, other in enumerate(table[:-1]):
        if other == block or not isinstance(refs.get(other), int) or refs[other] < 2:
            continue
        if _copies_with(d, {other: 1}) is not False:
            continue
        if _copies_with(d, {other: 1, block: 2}) is not False:
            continue
        if _copies_with(d, {other: 2, block: 1}) is not True:
            continue
        which = "the table's first block" if j == 0 else f"entry {j} of the table"
        return (
            f"yours copied block {block}, which only sequence {seq} holds (refcount 1); made "
            f"again on copies, yours copies where block {other}, {which}, has count 2 and "
            f"block {block} count 1, and writes in place where block {other} has count 1, "
            f"even with block {block} at count 2: yours decides by block {other}'s refcount. "
            "Copy-on-write reads the "
            "refcount of the block the token goes into, the table's last (table[-1])"
        )
    return None


COPY_FROM_RIGHT = WrittenFor((VALUE,), ("tables", "refcounts", "free"))
"""Both copied the same shared block, into other blocks."""


def copy_from_the_right(d: Difference) -> str | None:
    """Yours and the reference copied the same shared block, yours into the free list's right
    end where the reference takes its left end, and only that block left the list: read off the
    call alone."""
    mine = re.search(r"block=(\d+), offset=(\d+), cow_src=(\d+)", d.returned("mine") or "")
    theirs = re.search(r"block=(\d+), offset=(\d+), cow_src=(\d+)", d.returned("theirs") or "")
    free, after = d.before.get("free"), d.mine.get("free")
    if not (mine and theirs) or mine.group(3) != theirs.group(3):
        return None
    if not (isinstance(free, list) and isinstance(after, list)) or len(free) < 2:
        return None
    took, want = int(mine.group(1)), int(theirs.group(1))
    if took != free[-1] or want != free[0] or after != free[:-1]:
        return None
    return COPY_FROM_RIGHT.show(
        d,
        f"yours took block {took} for the copy of shared block {mine.group(3)}: the right end "
        f"of the free list {free}, where `_release` puts the blocks it frees; a copy is a new "
        f"block like any other, taken from the left end (popleft, through `_alloc`): {want}",
    )
