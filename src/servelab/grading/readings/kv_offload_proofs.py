"""Readings of a tier's, disk tier's or hierarchy's first diverging call whose cause a second
call proves: a put that reads a victim it has already discarded, a store that touches the copy
a tier below holds. Each re-runs yours on a copy (or a fresh object of your class) where that
cause, and no other, gives the answer it checks for."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.readings.kv_offload_cost import READINGS as LOAD_READINGS
from servelab.grading.readings.kv_offload_promote import PROMOTE_PROOFS
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget


def _read_after_discard(d: Difference) -> str | None:
    """Yours raised a lookup error on a put the reference completes: replayed on a copy with
    ``_read`` watched, yours read a chunk after taking it out of ``keys`` in that same put."""
    if not d.i_raised or d.they_raised or not d.error("mine").startswith("KeyError"):
        return None
    try:
        tier = copy.deepcopy(d.subject)
        own, late = tier._read, []

        def watched(key: Any) -> Any:
            if key not in tier:
                late.append(key)
            return own(key)

        tier._read = watched
        with line_budget(LINES_PER_CALL):
            tier.put(*d.args)
    except OutOfLines:
        return None
    except Exception:  # the error is the one the call under where: raised
        pass
    if not late:
        return None
    return (
        f"yours read {late[0]!r} with `_read` after this same put had taken it out of `keys` "
        "(a replay of the call watched the reads): read each victim's payload for the answer "
        "first, then `_discard` the victims"
    )


def _store_refreshed_below(d: Difference) -> str | None:
    """Yours left a tier below in another order than the reference: a fresh hierarchy of your
    class, its disk tier holding 'x' then 'y' and its CPU tier empty, stores 'x' and yours
    moves 'x' to the disk tier's newest end (a put or a get of the copy there, say)."""
    if d.i_raised or d.they_raised:
        return None
    lower = [n for n in d.differ if n.endswith(".keys") and not n.startswith("cpu.")]
    if not lower:
        return None
    try:
        h = type(d.subject)(1000, 1000)
        disk = h.tiers[1]
        disk.put("x", b"x" * 10)
        disk.put("y", b"y" * 10)
        with line_budget(LINES_PER_CALL):
            h.store("x", b"x" * 10)
        moved = list(disk.keys()) == ["y", "x"] and "x" in h.tiers[0]
    except (Exception, OutOfLines):
        return None
    if not moved:
        return None
    return (
        "yours touches the copy a tier below already holds: a replay stored 'x' into an "
        "empty CPU tier, and yours moved the disk tier's copy of 'x' to its newest end. A "
        "store writes into the CPU tier only; a tier below changes only by taking what the "
        "tier above evicts"
    )


def _payload_not_returned(d: Difference) -> str | None:
    """Yours (called again on a copy) returns None for a chunk the lookup found below, which
    neither yours nor the reference promoted: the payload its transfer read is not what the
    caller gets. The reference returns every found chunk's payload, promoted or not."""
    found = d.args[0] if d.args and isinstance(d.args[0], list) else []
    names = [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]
    if d.i_raised or d.they_raised or len(names) < 2 or not found:
        return None
    kind, got = d.probe("retrieve", *d.args)
    if kind != "returned" or not isinstance(got, list) or len(got) != len(found):
        return None
    top = names[0]
    for entry, payload in zip(found, got, strict=True):
        key, where = entry if isinstance(entry, tuple) and len(entry) == 2 else (None, 0)
        if payload is not None or not isinstance(where, int) or not 0 < where < len(names):
            continue
        above = [key in (side.get(f"{top}.keys") or []) for side in (d.mine, d.theirs)]
        if any(above):
            continue
        return (
            f"yours returned None for {key!r}, which the lookup found in the {names[where]} "
            f"tier and which stays there (the reference does not promote it either: the {top} "
            "tier has no room for it): retrieve returns the payload each transfer read from "
            "the tier the lookup found the chunk in, whether or not it was promoted"
        )
    return None


def _store_left_out(d: Difference) -> str | None:
    """A store that answered as the reference did and changed nothing, where the reference
    put the chunk into the top tier: the chunk is not where a store puts it, whatever tier
    below already held a copy. Seen in the fields alone."""
    names = [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]
    key = d.args[0] if d.args else None
    if len(names) < 2 or not d.same_outcome or d.changed("mine") or not d.changed("theirs"):
        return None
    top = names[0]
    if key in (d.before.get(f"{top}.keys") or []) or key not in (d.theirs.get(f"{top}.keys") or []):
        return None
    below = [n for n in names[1:] if key in (d.before.get(f"{n}.keys") or [])]
    held = f", which the {below[0]} tier holds," if below else ""
    return (
        f"yours returned {d.returned('mine')} and changed nothing: {key!r}{held} is not in the "
        f"{top} tier after it, where the reference stores it. A store puts the chunk into the "
        f"{top} tier even when a tier below holds a copy (what that evicts cascades down)"
    )


def _keeps_victim_bytes(cls: Any) -> bool:
    """A fresh 100-byte tier of your class stores 'x' (10 bytes), then 'y' (95), which evicts
    'x': `used` 105 is 'y' plus the victim's bytes kept, and no other count gives it."""
    try:
        tier = cls(100, "LRU")
        with line_budget(LINES_PER_CALL):
            tier.put("x", b"x" * 10)
            first = tier.used
            tier.put("y", b"y" * 95)
        return bool(first == 10 and list(tier.keys()) == ["y"] and tier.used == 105)
    except (Exception, OutOfLines):
        return False


def _victim_bytes_kept(d: Difference) -> str | None:
    """A put whose keys end as the reference's, a victim gone, and whose `used` is above the
    reference's by exactly the victims' bytes: they left `keys` but not `used`."""
    if not d.same_outcome or d.differ != frozenset({"used"}) or not d.args:
        return None
    before, after = d.before.get("keys") or [], d.mine.get("keys") or []
    gone = [k for k in before if k not in after]
    try:
        sizes = {k: d.subject.size_of(k) for k in gone}
        extra = d.mine["used"] - d.theirs["used"]
    except Exception:
        return None
    if not gone or extra != sum(sizes.values()) or not _keeps_victim_bytes(type(d.subject)):
        return None
    names = ", ".join(f"{k!r} ({n} bytes)" for k, n in sizes.items())
    return (
        f"yours evicted {names} but left {'its' if len(gone) == 1 else 'their'} bytes in "
        f"`used`: {d.mine['used']} where the reference has {d.theirs['used']}. A victim's "
        "bytes leave `used` as it leaves `keys` (`_discard` does both)"
    )


_NOT_A_USE = {
    "lookup": "a lookup only finds and pins a chunk; it is not a use",
    "release": "a release only drops the lookup's pins; it is not a use",
    "_cascade": (
        "a victim the tier below already holds is not put there again (a put of a key a "
        "tier holds is a use of it there)"
    ),
}


def _moved_newest(d: Difference) -> str | None:
    """A lookup, release or cascade that moved one chunk it was given to the newest end of a
    tier's order, all else as the reference left it (which kept the order): a use where the
    call makes none. Seen in the fields alone."""
    if d.method not in _NOT_A_USE or not d.same_outcome or not d.args:
        return None
    given = d.args[-1] if isinstance(d.args[-1], list) else []  # _cascade(start, chunks)
    keys = [e[0] if isinstance(e, tuple) and e else e for e in given]
    order = [n for n in d.differ if n.endswith(".keys")]
    if len(order) != 1 or len(d.differ) != 1:
        return None
    name = order[0]
    was, mine = d.before.get(name) or [], d.mine.get(name) or []
    if d.theirs.get(name) != was or not mine or mine[-1] not in keys:
        return None
    moved = mine[-1]
    if mine != [k for k in was if k != moved] + [moved]:
        return None
    return (
        f"yours moved {moved!r} to the newest end of `{name}` (its eviction order), where the "
        f"reference leaves the order as it was: {_NOT_A_USE[d.method]}, so it leaves the "
        "chunk's place alone (under LRU a read, get in retrieve, refreshes it)"
    )


PROOFS = {
    "put": (_read_after_discard, _victim_bytes_kept),
    "store": (_store_refreshed_below, _store_left_out, *PROMOTE_PROOFS["store"]),
    "load_seconds": LOAD_READINGS,
    "retrieve": (_payload_not_returned, *PROMOTE_PROOFS["retrieve"]),
    "lookup": (_moved_newest,),
    "release": (_moved_newest,),
    "_cascade": (_moved_newest,),
}
