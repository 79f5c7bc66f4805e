"""Readings of a block manager's first diverging call: tables, refcounts, copy-on-write."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from servelab.grading.readings.block_manager_counts import (
    copy_took_the_count,
    count_set,
    fork_left_partial,
    shared_kept,
)
from servelab.grading.readings.block_manager_cow import (
    copy_decided_by_other,
    copy_from_the_right,
    copy_given_back,
    over_released_reading,
)
from servelab.grading.readings.block_manager_fork import fork_dropped_tail
from servelab.grading.readings.block_manager_ids import wrong_error_reading
from servelab.grading.readings.block_manager_one import one_token_blocks as one_token_blocks
from servelab.grading.readings.block_manager_taken import taken_order_reading
from servelab.grading.readings.block_manager_walk import walk_skipped
from servelab.grading.readings.difference import (
    BOTH_RAISED,
    MINE_RAISED,
    SAME,
    VALUE,
    Difference,
    WrittenFor,
    failed_call,
)
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

# The difference each reading below was written for (see WrittenFor): a reading is shown only
# when the first diverging call differs that way and in nothing else.
BLOCKS = ("tables", "refcounts", "free", "num_free")
"""The fields a block taken or released changes."""
FAILED_LENGTH = WrittenFor((BOTH_RAISED,), ("lengths",))
FAILED_RELEASE = WrittenFor((BOTH_RAISED,), ("refcounts", "free", "num_free"))
FAILED_RECORD = WrittenFor((BOTH_RAISED,), ("tables", "lengths"))
FAILED_TAKE = WrittenFor((BOTH_RAISED,), (*BLOCKS, "lengths"))
REFUSED = WrittenFor((MINE_RAISED,), (*BLOCKS, "lengths"))
TOOK_MORE = WrittenFor((SAME, VALUE), ("tables", "refcounts", "free"), below=("num_free",))
"""Yours took blocks the reference does not."""
TABLE_SIZED = WrittenFor((SAME,), BLOCKS)
NAMED_SOURCE = WrittenFor((VALUE,))
"""Only the slot returned differs."""
KEPT_SHARE = WrittenFor((SAME, VALUE), above=("refcounts",))
CHILD_LENGTH = WrittenFor((SAME,), ("lengths",))
SHARED_UNCOUNTED = WrittenFor((SAME,), below=("refcounts",))
TABLE_KEPT = WrittenFor((SAME,), (*BLOCKS, "lengths"))
RELEASED = WrittenFor((SAME,), ("refcounts", "free", "num_free"))
SLOT_OFF_TABLE = WrittenFor((SAME,), ("tables",))
LENGTH_RECORDED = WrittenFor((SAME,), ("lengths",))
UNHELD_TAKEN = WrittenFor((SAME, VALUE), BLOCKS)
"""A block put in a table with refcount 0, and which block that was."""
"""The same slot returned, and only the writer's table differs."""


def _blocks_taken(d: Difference, side: Mapping[str, Any]) -> int:
    before, after = d.before.get("num_free"), side.get("num_free")
    return before - after if isinstance(before, int) and isinstance(after, int) else 0


def _cow_reading(d: Difference) -> str | None:
    right = copy_from_the_right(d) or _slot_names_source(d)
    if right:
        return right
    mine, theirs = _blocks_taken(d, d.mine), _blocks_taken(d, d.theirs)
    theirs_source = re.search(r"cow_src=(\d+)", d.returned("theirs") or "")
    if theirs_source and "cow_src=None" in (d.returned("mine") or ""):
        shared = int(theirs_source.group(1))
        if re.search(rf"block={shared},", d.returned("mine") or ""):
            # proven by the slot yours returned: it names the shared block itself
            holders = d.before.get("refcounts", {}).get(shared)
            held = f" ({holders} tables hold it)" if isinstance(holders, int) else ""
            return (
                f"yours wrote in place into block {shared}, which is shared{held}: a write "
                "into a shared partial block, whatever its number of holders above one, goes "
                f"into a new block that copies it first (cow_src={shared})"
            )
        return NAMED_SOURCE.show(
            d,
            "yours wrote into a copy but returned cow_src=None: the slot must name the shared "
            "block it copies (cow_src), or the copy never receives its tokens",
        )
    source = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    if source and "cow_src=None" in (d.returned("theirs") or ""):
        block = int(source.group(1))
        seq = d.args[0] if d.args else None
        length = d.before.get("lengths", {}).get(seq)
        size = getattr(d.subject, "block_size", 0)
        if isinstance(length, int) and size and length % size == 0:
            return TOOK_MORE.show(
                d,
                f"yours copied block {block}, which is full: the next token goes into a new "
                "block, and copy-on-write is only for a shared partial last block",
            )
        if d.before.get("refcounts", {}).get(block) == 1:
            return TOOK_MORE.show(
                d,
                copy_decided_by_other(d, block)
                or f"yours copied block {block}, which only this sequence still holds: "
                "copy-on-write is for the first writer of a shared block; the last holder "
                "(refcount 1) writes in place",
            )
    if mine > theirs and source:
        return TOOK_MORE.show(
            d,
            "yours copied a block the reference does not: copy-on-write copies only a shared "
            "partial last block (a full block is never written again), and only for the first "
            "writer; the last holder writes in place",
        )
    if mine > theirs:  # no copy named: more blocks taken, whatever for
        return TOOK_MORE.show(
            d,
            f"yours took {_many(mine, 'block')} where the reference takes {theirs}: an "
            "append_slot takes at most one block, a new one on the boundary or the copy of a "
            "shared partial last block",
        )
    if "refcounts" in d.differ and mine == theirs:
        return KEPT_SHARE.show(d, _kept_share(d, theirs_source))
    return over_released_reading(d)


def _slot_names_source(d: Difference) -> str | None:
    """Yours made the reference's copy (every field equal) and returned its cow_src and
    offset, but named the shared block it copied as the slot's block, not the copy that now
    ends the writer's table: read off the call alone."""
    mine = _COPIED.search(d.returned("mine") or "")
    theirs = _COPIED.search(d.returned("theirs") or "")
    seq = d.args[0] if d.args else None
    table, old = d.mine.get("tables", {}).get(seq), d.before.get("tables", {}).get(seq)
    if not (mine and theirs) or mine.group(2, 3) != theirs.group(2, 3):
        return None
    shared, copied = int(mine.group(3)), int(theirs.group(1))
    if int(mine.group(1)) != shared or not (isinstance(old, list) and old[-1:] == [shared]):
        return None
    if table != [*old[:-1], copied]:
        return None
    return NAMED_SOURCE.show(
        d,
        f"yours made the reference's copy (block {copied} took the shared block {shared}'s "
        f"place at the end of sequence {seq}'s table; every field after the call is the "
        f"reference's), but the slot it returned names block {shared}, the shared block it "
        f"copied (cow_src): the token goes into the copy, block {copied}, the table's last "
        "after the call, and a slot's block is the block the token is written to",
    )


_COPIED = re.compile(r"block=(\d+), offset=(\d+), cow_src=(\d+)")


def _kept_share(d: Difference, theirs_source: re.Match[str] | None) -> str | None:
    """A refcount yours left high: the shared block's, where the reference copied it, or else
    a block counted more times than table entries hold it; said only where seen."""
    refs, want = d.mine.get("refcounts", {}), d.theirs.get("refcounts", {})
    if theirs_source:
        shared = int(theirs_source.group(1))
        if refs.get(shared, 0) > want.get(shared, 0):
            return (
                "after copying, drop the writer's reference to the shared block: its refcount "
                "falls by one"
            )
    tables = d.mine.get("tables", {})
    entries = [b for t in tables.values() if isinstance(t, list) for b in t]
    for block, count in refs.items():
        if count > want.get(block, 0) and count > entries.count(block):
            held = entries.count(block)
            return (
                f"yours left block {block} at refcount {count}, though {held} table "
                f"{'entry holds' if held == 1 else 'entries hold'} it: a block's refcount is "
                "the number of table entries that hold it"
            )
    return None


def _source_reading(d: Difference) -> str | None:
    """Both copied, each naming another cow_src: yours is proven wrong when the reference's is
    the last block of the writer's table before the call, the block the copy is made from."""
    mine = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    theirs = re.search(r"cow_src=(\d+)", d.returned("theirs") or "")
    seq = d.args[0] if d.args else None
    table = d.before.get("tables", {}).get(seq)
    if not (mine and theirs and isinstance(table, list) and table):
        return None
    got, want = int(mine.group(1)), int(theirs.group(1))
    if got == want or table[-1] != want:
        return None
    written = re.search(rf"block={got},", d.returned("mine") or "")
    what = "the new block itself" if written else f"block {got}"
    return NAMED_SOURCE.show(
        d,
        f"yours named {what} as cow_src; the copy is made from the shared block {want}, the "
        f"last block of sequence {seq}'s table before the call: cow_src names the block whose "
        "tokens the new block must receive",
    )


def _slot_off_table(d: Difference) -> str | None:
    """The slot yours returned is the reference's, yet the writer's table does not end with
    that block: the token goes into a block its table does not hold last."""
    seq = d.args[0] if d.args else None
    got = _SLOT.search(d.returned("mine") or "")
    mine, theirs = d.mine.get("tables", {}).get(seq), d.theirs.get("tables", {}).get(seq)
    if got is None or (d.returned("mine") or "") != (d.returned("theirs") or ""):
        return None
    if not (isinstance(mine, list) and isinstance(theirs, list) and mine and theirs):
        return None
    block = int(got.group(1))
    if theirs[-1] != block or mine[-1] == block:
        return None
    if block in mine:
        where = f"put it at position {mine.index(block)} of sequence {seq}'s table ({mine})"
    else:
        where = f"left it out of sequence {seq}'s table ({mine})"
    return SLOT_OFF_TABLE.show(
        d,
        f"yours wrote the token into block {block} but {where}: the "
        "block a token goes into is the last of its table, so a new block is appended at the "
        "end and a copy takes the shared block's place",
    )


def _unheld_block(d: Difference) -> str | None:
    """A block yours put in a table this call while leaving its refcount at 0, and the end of
    the free list it was at, where that is certain. Not why: a block never counted and one
    counted, then lowered (the copy released in place of the shared block) look alike."""
    seq = d.args[0] if d.args else None
    table = d.mine.get("tables", {}).get(seq)
    old = d.before.get("tables", {}).get(seq) or []
    refs, free = d.mine.get("refcounts", {}), d.before.get("free")
    if not isinstance(table, list) or not isinstance(refs, Mapping):
        return None
    new = [b for b in table if b not in old and not refs.get(b)]
    if len(new) != 1:
        return None
    dropped = _dropped_copy(d, new[0]) or copy_given_back(d, new[0])
    if dropped:
        return UNHELD_TAKEN.show(d, dropped)
    said = (
        f"yours put block {new[0]} in sequence {seq}'s table with refcount 0: a block a table "
        "holds is counted, refcount 1 for a new block (as _alloc sets it)"
    )
    if isinstance(free, list) and len(free) > 1 and free[-1] == new[0]:
        said += (
            f"; block {new[0]} was the right end of the free list, and blocks are taken from "
            "its left end"
        )
    return UNHELD_TAKEN.show(d, said)


def _dropped_copy(d: Difference, block: int) -> str | None:
    """A copy-on-write whose new block went back on the free list at refcount 0 while the
    shared block it copies (the cow_src yours named, the table's last block before the call)
    kept every reference: the reference dropped by the wrong block, as the fields show it."""
    seq = d.args[0] if d.args else None
    source = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    old = d.before.get("tables", {}).get(seq) or []
    free, refs_before = d.mine.get("free"), d.before.get("refcounts", {})
    if not (source and old and isinstance(free, list) and block in free):
        return None
    shared = int(source.group(1))
    held = refs_before.get(shared)
    if old[-1] != shared or not isinstance(held, int) or held < 2:
        return None
    if d.mine.get("refcounts", {}).get(shared) != held:
        return None
    return (
        f"yours put the copy, block {block}, in sequence {seq}'s table yet back on the free "
        f"list at refcount 0, and left the shared block {shared} at refcount {held}, as before "
        "the call: after copying, the writer drops its reference to the shared block (cow_src), "
        "not to its new copy"
    )


_SLOT = re.compile(r"block=(\d+), offset=(\d+)")


def _slot_reading(d: Difference) -> str | None:
    """append_slot's token lands at position len (the length before the call): yours put it
    at another position of its own table (one further on, or in the block before the new one),
    or gave the right slot and did not count the token."""
    seq = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    length = d.before.get("lengths", {}).get(seq)
    if not isinstance(length, int) or not isinstance(size, int) or size < 1:
        return None
    mine, theirs = _SLOT.search(d.returned("mine") or ""), _SLOT.search(d.returned("theirs") or "")
    if mine is None or theirs is None:
        return None
    if mine.groups() == theirs.groups():
        got = d.mine.get("lengths", {}).get(seq)
        if got == length and d.theirs.get("lengths", {}).get(seq) == length + 1:
            new = " (a call that takes a block too)" if _blocks_taken(d, d.mine) else ""
            return (
                f"yours gave the token its slot but left the length of sequence {seq} at "
                f"{length}: every append_slot counts its token, length + 1, on every branch{new}"
            )
        return None
    table = d.mine.get("tables", {}).get(seq)
    block, offset = int(mine.group(1)), int(mine.group(2))
    if not isinstance(table, list) or block not in table:
        return None
    at = table.index(block) * size + offset
    where = f"block {theirs.group(1)}, offset {theirs.group(2)}"
    if at == length + 1:
        return (
            f"yours gave the token the slot of position {at} (block {block}, offset {offset}); "
            f"the token's position is {length}, the length before the call ({where}): a "
            "token's slot is block position // block_size of its table, offset position % "
            "block_size, counted from 0"
        )
    last = (d.before.get("tables", {}).get(seq) or [None])[-1]
    if length % size == 0 and at == length - size and block == last:
        return (
            f"yours gave the token offset {offset} of block {block}, the full block before the "
            f"new one: position {length} starts a block, so on the boundary the token goes to "
            f"offset 0 of the block just appended ({where})"
        )
    if str(block) == theirs.group(1) and offset != length % size:
        copy = "cow_src=None" not in (d.returned("mine") or "cow_src=None")
        kept = " (a copy holds the shared block's tokens at their offsets)" if copy else ""
        return (
            f"yours gave the token offset {offset} of block {block}; its position is {length}, "
            f"the length before the call, so its offset is {length} % {size} = "
            f"{length % size}{kept}"
        )
    return None


def _table_sizes_differ(d: Difference) -> bool:
    """Whether the sequence's table holds another number of blocks than the reference's: the
    precondition of the ceil reading (same count, other blocks, is another rule)."""
    seq = d.args[0] if d.args else None
    mine = d.mine.get("tables", {}).get(seq)
    theirs = d.theirs.get("tables", {}).get(seq)
    sizes = [len(t) if isinstance(t, list) else None for t in (mine, theirs)]
    return sizes[0] != sizes[1]


def _refused_fit(d: Difference) -> str | None:
    """An allocate refused though the blocks it needs were free (counted from the call's own
    arguments and the free count before it), or None when the evidence does not show that."""
    n = d.args[1] if len(d.args) > 1 else None
    size = getattr(d.subject, "block_size", None)
    free = d.before.get("num_free")
    if not (isinstance(n, int) and isinstance(size, int) and isinstance(free, int)):
        return None
    if not (_count(n) and _count(free)) or isinstance(size, bool) or size < 1:
        return None
    need = -(-n // size)
    if need > free:
        return None
    asked = f"yours refused {_many(n, 'token')}, which need {_many(need, 'block')}"
    if need == free and _refuses_exact_fits(d, free, size):
        return (
            f"{asked}, with exactly {free} free: a request fits when it needs no more than the "
            "free blocks (need <= free): an exact fit is no shortage"
        )
    if need == free:
        return (
            f"{asked}, with exactly {free} free, so it fits: count ceil(n / block_size) "
            "blocks and refuse only when that is more than are free"
        )
    return f"{asked}, with {free} free: refuse only when it needs more blocks than are free"


def _short_of_blocks(d: Difference) -> bool:
    """Both raised OutOfBlocks: a reading of what a failed call took or recorded before it
    found no room is about that shortage; another error (SequenceExists, InvalidLength) is
    raised by a check that no free block enters."""
    return d.error("mine") == d.error("theirs") == "OutOfBlocks"


def _counted(d: Difference) -> bool:
    """Yours left the sequence's length one above the length before the call: the token
    counted, though no slot was found for it."""
    seq = d.args[0] if d.args else None
    before, mine = d.before.get("lengths", {}).get(seq), d.mine.get("lengths", {}).get(seq)
    return isinstance(before, int) and mine == before + 1


def _length_at_alloc(d: Difference) -> int | None:
    """Your call run again on a copy with ``_alloc`` watched: the sequence's length when it
    first asked for a block (one up: counted before allocating); None where it never asked or
    cannot be run again. A token counted after the failure (a ``finally``) asks at the old one."""
    seq, seen = d.args[0], []
    try:
        obj = copy.deepcopy(d.subject)
        alloc = obj._alloc

        def spied() -> Any:
            seen.append(obj.seq_len(seq))
            return alloc()

        obj._alloc = spied
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(*d.args)
    except (Exception, OutOfLines):
        pass
    return seen[0] if seen and type(seen[0]) is int else None


def _released_shared(d: Difference) -> bool:
    """The failed append was a copy-on-write (the last block shared, the length inside it),
    and yours dropped that block's refcount: released before the copy was in hand."""
    seq = d.args[0] if d.args else None
    table, length = d.before.get("tables", {}).get(seq), d.before.get("lengths", {}).get(seq)
    size = getattr(d.subject, "block_size", 0)
    if not (isinstance(table, list) and table and isinstance(length, int)):
        return False
    if not isinstance(size, int) or size < 1 or length % size == 0:
        return False
    shared = table[-1]
    held = d.before.get("refcounts", {}).get(shared)
    now = d.mine.get("refcounts", {}).get(shared, 0)
    return isinstance(held, int) and held > 1 and now < held


def _failed_check(d: Difference) -> str | None:
    """A call that raised another error than OutOfBlocks, as the reference does, after
    changing fields: the check that raises it comes after what it changed."""
    error = d.error("theirs")
    if d.error("mine") != error or not error:
        return failed_call(d)
    fields = ", ".join(sorted(d.differ))
    return (
        f"yours raised {error}, as the reference does, but changed {fields} first: a call "
        f"that raises changes nothing, so make the check that raises {error} before the "
        "lines that record or take anything"
    )


def _fork_took(d: Difference) -> str:
    """A fork that took blocks: copies of the parent's (a child table of new blocks, as many),
    said only where the tables show it."""
    parent, child = (d.args[0], d.args[1]) if len(d.args) > 1 else (None, None)
    table = d.before.get("tables", {}).get(parent)
    got = d.mine.get("tables", {}).get(child)
    taken = _blocks_taken(d, d.mine)
    copies = isinstance(table, list) and isinstance(got, list) and bool(table)
    if copies and len(got) == len(table) == taken and not set(got) & set(table):
        return "yours copied the blocks instead of sharing them: fork shares the parent's blocks"
    return (
        f"yours took {_many(taken, 'block')} in fork: the child shares the parent's blocks "
        "(one more reference each) and takes none until it writes"
    )


def _refuses_exact_fits(d: Difference, free: int, size: int) -> bool:
    """Your allocate, asked again from the state before the call, refuses both a request
    that fills the last free block and one that just enters it, and takes one needing a block
    less: the comparison refuses an exact fit (a count one block high refuses only the first)."""
    seq = d.args[0]
    exact = {free * size, max(0, (free - 1) * size + 1)}
    if any(d.probe("allocate", seq, n)[0] != "raised" for n in exact):
        return False
    return free == 0 or d.probe("allocate", seq, (free - 1) * size)[0] == "returned"


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _many(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def block_manager_reading(d: Difference) -> str | None:
    """The rule a block manager's first diverging call breaks."""
    if d.hidden:
        return None
    m, differ = d.method, d.differ
    failed = d.i_raised and d.they_raised
    if failed and differ and not _short_of_blocks(d):
        return _failed_check(d)
    if failed and differ:
        if m == "append_slot" and differ == {"lengths"} and _counted(d):
            seq = d.args[0]
            n = d.before.get("lengths", {}).get(seq)
            if isinstance(n, int) and _length_at_alloc(d) == n + 1:
                return FAILED_LENGTH.show(
                    d,
                    "yours raised the length before allocating: a failed append_slot changes "
                    "nothing, so raise the length only once the block is in hand",
                )
            return FAILED_LENGTH.show(
                d,
                f"yours counted the token (length {n} -> {n + 1 if isinstance(n, int) else n}) "
                "though the call raised: a failed append_slot changes nothing, so count the "
                "token only once its block is in hand",
            )
        if m == "append_slot" and _released_shared(d):
            return FAILED_RELEASE.show(
                d,
                "a failed append_slot changes nothing: allocate the copy before releasing the "
                "shared block",
            )
        if m == "allocate" and {"tables", "lengths"} & differ and _blocks_taken(d, d.mine) == 0:
            return FAILED_RECORD.show(
                d,
                "yours records the sequence before finding that it does not fit: a failed "
                "allocate changes nothing (check first, then record)",
            )
        if m == "allocate":
            return FAILED_TAKE.show(
                d,
                "a failed allocate changes nothing: check that every block it needs is free "
                "before taking any (all or nothing)",
            )
        return failed_call(d)
    one = one_token_blocks(d) if m == "append_slot" and not d.they_raised else None
    if one:
        return one
    if d.i_raised and not d.they_raised and d.error("mine") != "OutOfBlocks":
        wrong = wrong_error_reading(d)
        if wrong:
            return wrong
    if m == "allocate" and d.args and len(d.args) > 1 and d.args[1] == 0 and "tables" in differ:
        return TOOK_MORE.show(
            d, "a sequence of zero tokens holds no block: ceil(0 / block_size) is 0"
        )
    if m == "allocate" and d.i_raised and not d.they_raised:
        return REFUSED.show(d, _refused_fit(d))
    if m == "allocate" and "tables" in differ and _table_sizes_differ(d):
        return TABLE_SIZED.show(
            d, "a table holds ceil(len / block_size) blocks, in ints -(-n // block_size)"
        )
    if m == "allocate" and differ == {"lengths"} and len(d.args) > 1:
        got = d.mine.get("lengths", {}).get(d.args[0])
        if d.theirs.get("lengths", {}).get(d.args[0]) == d.args[1] and got != d.args[1]:
            return LENGTH_RECORDED.show(
                d,
                f"yours recorded the length {got} for allocate({d.args[0]}, {d.args[1]}): a "
                "sequence's length counts its tokens, so it is n_tokens itself",
            )
    if m == "append_slot" and "refcounts" in differ:
        took_count = copy_took_the_count(d)
        if took_count:
            return took_count
    if m in ("allocate", "append_slot") and "refcounts" in differ:
        unheld = _unheld_block(d)
        if unheld:
            return unheld
    slot = _slot_reading(d) if m == "append_slot" else None
    if slot:
        return slot
    copied = "cow_src=None" not in (d.returned("mine") or "cow_src=None")
    took = _blocks_taken(d, d.mine) > _blocks_taken(d, d.theirs) == 0
    if m == "append_slot" and took and not copied:
        return TOOK_MORE.show(
            d,
            "append_slot takes a new block only on the boundary (when len % block_size == 0); "
            "otherwise the token goes into the last block",
        )
    if m == "append_slot":
        return _cow_reading(d) or _source_reading(d) or _slot_off_table(d)
    if m == "fork" and "lengths" in differ:
        child = d.args[1] if len(d.args) > 1 else None
        got = d.mine.get("lengths", {}).get(child)
        want = d.theirs.get("lengths", {}).get(child)
        if got == want:
            return None  # the child's length is right: another length differs
        if got == 0:
            return CHILD_LENGTH.show(
                d, f"the child starts with the parent's length ({want}), not length zero"
            )
        return CHILD_LENGTH.show(d, f"the child starts with the parent's length: {want}, not {got}")
    if m == "fork" and _blocks_taken(d, d.mine) > 0:
        return TOOK_MORE.show(d, _fork_took(d))
    if m == "fork" and "refcounts" in differ:
        counted = count_set(d) or fork_left_partial(d) or fork_dropped_tail(d)
        if counted:
            return counted
        return SHARED_UNCOUNTED.show(
            d, "fork shares each block: raise its refcount by one for the child's table"
        )
    seq = d.args[0] if d.args else None
    if m == "free_seq" and "tables" in differ and seq in d.mine.get("tables", {}):
        return TABLE_KEPT.show(
            d,
            "free_seq forgets the sequence (table and length) as it releases its blocks; a "
            "table left behind gets its blocks freed twice",
        )
    free = d.mine.get("free")
    if isinstance(free, list) and len(free) != len(set(free)):
        twice = next(b for b in free if free.count(b) > 1)
        return (
            f"yours put block {twice} on the free list twice: a block is released once, when "
            "its refcount reaches 0"
        )
    if m in ("free_seq", "_release") and differ & {"refcounts", "num_free"}:
        return RELEASED.show(d, _released(d))
    return taken_order_reading(d)


def _released(d: Difference) -> str:
    """What yours released, read off the refcounts and the free list: an entry left held, a
    reference dropped twice, or a block freed while still held; each said only where seen."""
    rule = "release one reference per table entry"
    seq = d.args[0] if d.args else None
    table = d.before.get("tables", {}).get(seq) if d.method == "free_seq" else [seq]
    refs_before, refs = d.before.get("refcounts"), d.mine.get("refcounts")
    free_before, free = d.before.get("free"), d.mine.get("free")
    if not (isinstance(table, list) and isinstance(refs_before, Mapping)):
        return f"{rule}: a block goes back to the free list when its refcount reaches 0"
    if not (isinstance(refs, Mapping) and isinstance(free, list) and isinstance(free_before, list)):
        return f"{rule}: a block goes back to the free list when its refcount reaches 0"
    lost = {b: refs_before.get(b, 0) - refs.get(b, 0) for b in table}
    fewer = [b for b in dict.fromkeys(table) if lost[b] < table.count(b)]
    more = [b for b in dict.fromkeys(table) if lost[b] > table.count(b)]
    held = [b for b in free if b not in free_before and refs.get(b, 0) > 0]
    whose = f"sequence {seq}'s table" if d.method == "free_seq" else "the call"
    # freed though another table holds it: more holders before the call than this one drops
    others = [b for b in free if b not in free_before and refs_before.get(b, 0) > table.count(b)]
    if others:
        b = others[0]
        ignored = " (do not ignore the refcount)" if _frees_whatever_held(d, b) else ""
        return (
            f"yours put block {b} on the free list though another table still holds it "
            f"(refcount {refs_before.get(b)} before the call, {table.count(b)} of them "
            f"from {whose}): a block goes back to the free list when its refcount reaches 0, and "
            f"only then{ignored}"
        )
    if fewer and not more and not held:
        b = fewer[0]
        kept = walk_skipped(d, fewer) or shared_kept(d, b)
        if kept:
            return kept
        return (
            f"yours left block {b} at refcount {refs.get(b, 0)}: it lost {lost[b]} of the "
            f"{table.count(b)} reference(s) {whose} holds; {rule}, every entry"
        )
    if more and not fewer and not held:
        b = more[0]
        return (
            f"yours dropped block {b}'s refcount by {lost[b]} where {whose} holds it "
            f"{table.count(b)} time(s): {rule}, once"
        )
    if held and not fewer and not more:
        b = held[0]
        return (
            f"yours put block {b} on the free list at refcount {refs.get(b, 0)}: a block goes "
            "back to the free list when its refcount reaches 0, and only then"
        )
    return f"{rule}: a block goes back to the free list when its refcount reaches 0"


def _frees_whatever_held(d: Difference, block: int) -> bool:
    """Yours, called again on a copy where one more table holds ``block`` (its refcount one
    higher), still frees it at refcount 0: the count is not read. A refcount dropped twice, or
    compared with 1 for 0, leaves that block held."""
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            obj.ref[block] += 1
            getattr(obj, d.method)(*d.args)
            return block in obj.free_list() and obj.refcount(block) == 0
    except Exception:
        return False
    except OutOfLines:
        return False
