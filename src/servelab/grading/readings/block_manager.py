"""Readings of a block manager's first diverging call: tables, refcounts, copy-on-write."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from servelab.grading.readings.difference import Difference, failed_call


def _blocks_taken(d: Difference, side: Mapping[str, Any]) -> int:
    before, after = d.before.get("num_free"), side.get("num_free")
    return before - after if isinstance(before, int) and isinstance(after, int) else 0


def _cow_reading(d: Difference) -> str | None:
    mine, theirs = _blocks_taken(d, d.mine), _blocks_taken(d, d.theirs)
    theirs_source = re.search(r"cow_src=(\d+)", d.returned("theirs") or "")
    if theirs_source and "cow_src=None" in (d.returned("mine") or ""):
        return (
            "yours wrote into a copy but returned cow_src=None: the slot must name the shared "
            "block it copies (cow_src), or the copy never receives its tokens"
        )
    source = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    if source and "cow_src=None" in (d.returned("theirs") or ""):
        block = int(source.group(1))
        seq = d.args[0] if d.args else None
        length = d.before.get("lengths", {}).get(seq)
        size = getattr(d.subject, "block_size", 0)
        if isinstance(length, int) and size and length % size == 0:
            return (
                f"yours copied block {block}, which is full: the next token goes into a new "
                "block, and copy-on-write is only for a shared partial last block"
            )
        if d.before.get("refcounts", {}).get(block) == 1:
            return (
                f"yours copied block {block}, which only this sequence still holds: "
                "copy-on-write is for the first writer of a shared block; the last holder "
                "(refcount 1) writes in place"
            )
    if mine > theirs:
        return (
            "yours copied a block the reference does not: copy-on-write copies only a shared "
            "partial last block (a full block is never written again), and only for the first "
            "writer; the last holder writes in place"
        )
    if "refcounts" in d.differ and mine == theirs:
        return (
            "after copying, drop the writer's reference to the shared block: its refcount "
            "falls by one"
        )
    return None


def block_manager_reading(d: Difference) -> str | None:
    """The rule a block manager's first diverging call breaks."""
    if d.hidden:
        return None
    m, differ = d.method, d.differ
    failed = d.i_raised and d.they_raised
    if failed and differ:
        if m == "append_slot" and "lengths" in differ and "tables" not in differ:
            return (
                "yours raised the length before allocating: a failed append_slot changes "
                "nothing, so raise the length only once the block is in hand"
            )
        if m == "append_slot":
            return (
                "a failed append_slot changes nothing: allocate the copy before releasing the "
                "shared block"
            )
        if m == "allocate" and "tables" in differ and _blocks_taken(d, d.mine) == 0:
            return (
                "yours records the sequence before finding that it does not fit: a failed "
                "allocate changes nothing (check first, then record)"
            )
        if m == "allocate":
            return (
                "a failed allocate changes nothing: check that every block it needs is free "
                "before taking any (all or nothing)"
            )
        return failed_call(d)
    if m == "allocate" and d.args and len(d.args) > 1 and d.args[1] == 0 and "tables" in differ:
        return "a sequence of zero tokens holds no block: ceil(0 / block_size) is 0"
    if m == "allocate" and "tables" in differ:
        return "a table holds ceil(len / block_size) blocks, in ints -(-n // block_size)"
    if m == "append_slot" and _blocks_taken(d, d.mine) > _blocks_taken(d, d.theirs) == 0:
        return (
            "append_slot takes a new block only on the boundary (when len % block_size == 0); "
            "otherwise the token goes into the last block"
        )
    if m == "append_slot":
        return _cow_reading(d)
    if m == "fork" and "lengths" in differ:
        child = d.args[1] if len(d.args) > 1 else None
        got = d.mine.get("lengths", {}).get(child)
        want = d.theirs.get("lengths", {}).get(child)
        if got == 0:
            return f"the child starts with the parent's length ({want}), not length zero"
        return f"the child starts with the parent's length: {want}, not {got}"
    if m == "fork" and _blocks_taken(d, d.mine) > 0:
        return "yours copied the blocks instead of sharing them: fork shares the parent's blocks"
    if m == "fork" and "refcounts" in differ:
        return "fork shares each block: raise its refcount by one for the child's table"
    if m == "free_seq" and "tables" in differ:
        return (
            "free_seq forgets the sequence (table and length) as it releases its blocks; a "
            "table left behind gets its blocks freed twice"
        )
    free = d.mine.get("free")
    if isinstance(free, list) and len(free) != len(set(free)):
        twice = next(b for b in free if free.count(b) > 1)
        return (
            f"yours put block {twice} on the free list twice: a block is released once, when "
            "its refcount reaches 0"
        )
    if m in ("free_seq", "_release") and differ & {"refcounts", "free", "num_free"}:
        return (
            "release one reference per table entry: a block goes back to the free list when its "
            "refcount reaches 0, and only then (do not ignore the refcount)"
        )
    return None
