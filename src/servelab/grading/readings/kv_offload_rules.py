"""Readings of a tier's or hierarchy's first diverging call that state a rule the call breaks
for certain, whatever the code behind it: what a put of a key already held leaves, which
chunk is too large, victims that cannot make room, where a store that misses writes, what a
promotion leaves below, and (proven by a second call) an attention term that grows linearly."""

from __future__ import annotations

import ast
import math
from typing import Any

from servelab.grading.readings.difference import (
    THEIRS_RAISED,
    Difference,
    written_for,
)
from servelab.grading.readings.kv_offload_choice import (
    miss_recorded,
    refused_counted,
    stopped_at_refused,
    victims_without_bytes,
)
from servelab.grading.readings.kv_offload_proofs import PROOFS
from servelab.grading.readings.kv_offload_reads import pins_taken_back

RESIDENT_PUT = written_for("used", "keys")
TOO_LARGE = written_for("keys", "used", outcomes=(THEIRS_RAISED,))
NO_ROOM = written_for()
STORE_MISSED = written_for("keys", "used", "held_bytes")
PROMOTED_MOVED = written_for("keys", "used", "pins", "refs", "held_bytes")


def _field(state: Any, name: str) -> Any:
    """A tier's field, from a tier's state (``keys``) or a hierarchy's top tier's (``cpu.keys``)."""
    if name in state:
        return state[name]
    return next((v for k, v in state.items() if k.endswith("." + name)), None)


def _tiers(d: Difference) -> list[str]:
    return [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]


def _put_resident(d: Difference) -> str | None:
    """A put of a key the tier already holds changed `used`: the reference's is a use (a
    refresh under LRU) and changes no bytes, so any change of them breaks that rule."""
    key = d.args[0] if d.args else None
    keys = _field(d.before, "keys") or []
    was, mine, theirs = (_field(s, "used") for s in (d.before, d.mine, d.theirs))
    if key not in keys or not RESIDENT_PUT.fits(d) or theirs != was or mine == theirs:
        return None
    return (
        f"yours changed `used` from {was} to {mine} on a put of {key!r}, which the tier "
        "already holds: a put of a resident key is a use (under LRU a refresh), not a new "
        "copy, so its bytes and `used` stay as they were"
    )


def _too_large_kept(d: Difference) -> str | None:
    """The reference raised ChunkTooLarge, yours returned: a chunk larger than the whole tier
    raises, whatever the tier holds."""
    if not d.error("theirs").startswith("ChunkTooLarge") or not TOO_LARGE.fits(d):
        return None
    payload = d.args[1] if len(d.args) > 1 else None
    capacity = getattr(d.subject, "capacity", None)
    if not isinstance(payload, bytes | bytearray) or not isinstance(capacity, int):
        return None
    held = d.args[0] in (_field(d.before, "keys") or [])
    whose = ", whose key it already holds" if held else ""
    said = (
        f"yours returned {d.returned('mine')} for a chunk of {len(payload)} bytes{whose}, in a "
        f"tier of {capacity}: a chunk larger than the whole tier raises ChunkTooLarge whatever "
        "the tier holds, so the size is checked before anything else"
    )
    was, mine = _field(d.before, "used"), _field(d.mine, "used")
    if held and isinstance(was, int) and isinstance(mine, int) and mine != was:
        said += (
            f". Yours also changed `used` from {was} to {mine} for a key it holds: a put of a "
            "resident key is a use of the copy there (under LRU a refresh), never a new copy "
            "or an update, so its bytes stay"
        )
    return said


def _refused_counted(d: Difference) -> str | None:
    return refused_counted(d) if NO_ROOM.fits(d) else None


def _stopped_at_refused(d: Difference) -> str | None:
    return stopped_at_refused(d) if NO_ROOM.fits(d) else None


def _victims_short(d: Difference) -> str | None:
    """Yours chose victims (a list) where the reference finds no room (None), and those
    victims with the free bytes are short of the chunk: a choice that cannot make room."""
    mine, theirs = d.returned("mine"), d.returned("theirs")
    t: Any = d.subject
    if theirs != "None" or mine is None or not mine.startswith("[") or not NO_ROOM.fits(d):
        return None
    size = d.args[0] if d.args else None
    try:
        chosen = [k for k in t.keys() if repr(k) in mine]
        freed = sum(t.size_of(k) for k in chosen)
        free = t.capacity - t.used
    except Exception:
        return None
    if not isinstance(size, int) or free + freed >= size:
        return None
    return (
        f"yours chose {mine}, which with the {free} free bytes make {free + freed} of the "
        f"{size} the chunk needs: when what can_evict allows cannot make room, _choose_victims "
        "returns None and the put misses"
    )


def _store_missed_below(d: Difference) -> str | None:
    """The reference's store missed (False, nothing changed) and yours wrote the chunk into a
    tier below the top one: a store writes into the top tier alone."""
    tiers = _tiers(d)
    key = d.args[0] if d.args else None
    if d.returned("theirs") != "False" or d.changed("theirs") or not STORE_MISSED.fits(d):
        return None
    below = [
        t
        for t in tiers[1:]
        if key in (d.mine.get(f"{t}.keys") or []) and key not in (d.before.get(f"{t}.keys") or [])
    ]
    if not below or len(tiers) < 2:
        return None
    return (
        f"yours stored {key!r} in the {below[0]} tier when the {tiers[0]} tier could make no "
        f"room: store writes into the {tiers[0]} tier only (a tier below receives only what "
        "the one above it evicts); when it cannot make room, store is a miss, False, and "
        "nothing changes"
    )


def _promotion_moved(d: Difference) -> str | None:
    """A chunk found below and promoted left its lower tier in yours, where the reference keeps
    it, though that tier had room for it beside what yours wrote there: not an eviction."""
    tiers = _tiers(d)
    found = d.args[0] if d.args and isinstance(d.args[0], list) else []
    h: Any = d.subject
    if len(tiers) < 2 or not d.same_outcome or not PROMOTED_MOVED.fits(d):
        return None
    top = tiers[0]
    for entry in found:
        key, where = entry if isinstance(entry, tuple) and len(entry) == 2 else (None, 0)
        if not isinstance(where, int) or not 0 < where < len(tiers):
            continue
        tier = tiers[where]
        if key not in (d.mine.get(f"{top}.keys") or []):
            continue
        gone = key not in (d.mine.get(f"{tier}.keys") or [])
        if not gone or key not in (d.theirs.get(f"{tier}.keys") or []):
            continue
        try:
            room = d.mine[f"{tier}.used"] + h.tiers[where].size_of(key) <= h.tiers[where].capacity
        except Exception:
            return None
        if room:
            return (
                f"yours removed {key!r} from the {tier} tier after copying it up to the {top} "
                f"tier, though the {tier} tier had room for it: a promotion copies the chunk "
                f"up and the copy below stays, so the node still holds it once the {top} tier "
                "evicts it"
            )
    return None


def _attention_linear(d: Difference) -> str | None:
    """Yours is the reference's weights term plus an attention term linear in the tokens, at
    the call's tokens and again (your method called anew) at twice as many."""
    h: Any = d.subject
    tokens = d.args[0] if d.args else None
    if not isinstance(tokens, int) or tokens < 1:
        return None

    def linear(n: int) -> float:
        m = h.model
        return float((2 * m.params * n + 2 * m.layers * m.d_model * n) / h.flops)

    try:
        mine = float(d.returned("mine") or "")
        again = d.probe("recompute_seconds", 2 * tokens)
        ok = math.isclose(mine, linear(tokens), rel_tol=1e-9) and again[0] == "returned"
        ok = ok and math.isclose(again[1], linear(2 * tokens), rel_tol=1e-9)
    except Exception:
        return None
    if not ok:
        return None
    return (
        f"yours returned {mine:.6g} s for {tokens} tokens, and twice the tokens cost yours "
        "twice the time: its attention term grows with the tokens, where it grows with their "
        "square, 2 · layers · d_model · tokens² (each token attends to every token before it)"
    )


LOOKUP_SHORT = written_for("pins")


def _lookup_stopped_short(d: Difference) -> str | None:
    """Yours found the reference's first chunks, in its tiers, and stopped before the next one,
    which some tier holds (the reference found it): a lookup stops only at a key no tier
    holds, whatever made yours stop."""
    mine, theirs = shown(d.returned("mine")), shown(d.returned("theirs"))
    tiers = _tiers(d)
    if not isinstance(mine, list) or not isinstance(theirs, list) or not LOOKUP_SHORT.fits(d):
        return None
    if not len(mine) < len(theirs) or theirs[: len(mine)] != mine:
        return None
    kept = [e[0] for e in theirs if isinstance(e, tuple | list) and len(e) == 2]
    if taken_back := pins_taken_back(d, kept):
        return taken_back
    key, where = theirs[len(mine)] if len(theirs[len(mine)]) == 2 else (None, None)
    if not isinstance(where, int) or not 0 <= where < len(tiers):
        return None
    after = f"after {mine[-1][0]!r}" if mine else "before the first key"
    return (
        f"yours stopped {after}, yet {key!r}, the next key, is held in the {tiers[where]} "
        "tier: a lookup pins key after key while some tier holds the next one, and stops only "
        "at the first key that no tier holds"
    )


PUT_BYTES = written_for("used")


def _put_bytes(d: Difference) -> str | None:
    """A put that stored a new chunk, evicting nothing, and moved `used` by another amount
    than the reference (the payload's size), the keys the same: the chunk counted at other
    bytes than len(payload), seen in the call itself."""
    key = d.args[0] if d.args else None
    payload = d.args[1] if len(d.args) > 1 else None
    before = _field(d.before, "keys") or []
    mine, theirs = _field(d.mine, "keys"), _field(d.theirs, "keys")
    if not isinstance(payload, bytes | bytearray) or key in before or not PUT_BYTES.fits(d):
        return None
    if mine != theirs or not isinstance(mine, list) or key not in mine:
        return None
    if any(k not in mine for k in before) or d.returned("mine") != d.returned("theirs"):
        return None
    was, now, want = (_field(s, "used") for s in (d.before, d.mine, d.theirs))
    if not all(isinstance(v, int) for v in (was, now, want)) or want - was != len(payload):
        return None
    if now == want:
        return None
    return (
        f"yours added {now - was} to `used` for {key!r}, a chunk of {len(payload)} bytes, "
        "evicting nothing: a chunk takes exactly its payload's bytes, len(payload), of the "
        "tier's capacity, so `used` grows by that and no more"
    )


ORDER_ONLY = written_for("keys")


def _count_moved_order(d: Difference) -> str | None:
    """A pin, unpin, ref or unref that left the tier's keys in another order: the reference's
    changes a count and never the policy order (only a get or a put is a use)."""
    before, mine = _field(d.before, "keys"), _field(d.mine, "keys")
    theirs = _field(d.theirs, "keys")
    if not isinstance(mine, list) or theirs != before or not ORDER_ONLY.fits(d):
        return None
    if mine == theirs or sorted(map(repr, mine)) != sorted(map(repr, theirs)):
        return None
    what = "pin" if d.method in ("pin", "unpin") else "transfer reference"
    return (
        f"yours moved chunks in the policy order on {d.method}({d.args[0]!r}) (keys "
        f"{before} -> {mine}): a {what} only changes a count; it is not a use, so the order "
        "(the next victim first) changes only on a get or a put"
    )


CASCADE_ORDER = written_for("keys")


def _cascade_reordered(d: Difference) -> str | None:
    """A cascade that added the same victims to a tier below as the reference, in another
    order than it was given them, the tier's other keys where the reference's are."""
    chunks = d.args[1] if len(d.args) > 1 and isinstance(d.args[1], list) else []
    given = [c[0] for c in chunks if isinstance(c, tuple) and len(c) == 2]
    if len(given) < 2 or not CASCADE_ORDER.fits(d):
        return None
    for tier in _tiers(d)[1:]:
        was = d.before.get(f"{tier}.keys") or []
        full_mine, full_theirs = (
            d.mine.get(f"{tier}.keys") or [],
            d.theirs.get(f"{tier}.keys") or [],
        )
        mine = [k for k in full_mine if k not in was]
        theirs = [k for k in full_theirs if k not in was]
        order = [k for k in given if k in theirs]
        same = sorted(map(repr, mine)) == sorted(map(repr, order))
        if len(theirs) < 2 or theirs != order or mine == order or not same:
            continue
        # the tier's other keys where the reference's are: only the new keys' order differs
        placed = iter(mine)
        if full_mine == [next(placed) if k in order else k for k in full_theirs]:
            return (
                f"yours wrote {mine} into the {tier} tier, in another order than _cascade was "
                f"given them ({order}): write the victims down in the order put returned "
                "them (policy order, the next victim first), so that the tier below keeps "
                "their order"
            )
    return None


STORE_KEPT = written_for("keys", "used", "held_bytes")


def _store_dropped_below(d: Difference) -> str | None:
    """A store that removed its own key's copy from a tier below, which keeps it in the
    reference and had room for it beside what yours wrote there: not an eviction."""
    key = d.args[0] if d.args else None
    h: Any = d.subject
    if not d.same_outcome or not STORE_KEPT.fits(d):
        return None
    for i, tier in enumerate(_tiers(d)[1:], start=1):
        if key not in (d.before.get(f"{tier}.keys") or []):
            continue
        if key in (d.mine.get(f"{tier}.keys") or []):
            continue
        if key not in (d.theirs.get(f"{tier}.keys") or []):
            continue
        try:
            below = h.tiers[i]
            room = d.mine[f"{tier}.used"] + below.size_of(key) <= below.capacity
        except Exception:
            return None
        if room:
            return (
                f"yours removed {key!r} from the {tier} tier while storing it, though that "
                "tier had room for it: a store writes into the fastest tier, and a tier "
                "below changes only by taking what the tier above evicts; the copy below "
                "stays (the same chunk), so the node keeps it when the faster copy goes"
            )
    return None


HELD_CHOSEN = written_for()


def _victim_held(d: Difference) -> str | None:
    """Yours chose a victim the reference leaves, which a lookup pinned or a transfer
    references in the state before the call: not evictable, whatever else yours did."""
    mine, theirs = shown(d.returned("mine")), shown(d.returned("theirs"))
    if not isinstance(mine, list) or not HELD_CHOSEN.fits(d):
        return None
    pins, refs = _field(d.before, "pins") or {}, _field(d.before, "refs") or {}
    left = theirs if isinstance(theirs, list) else []
    for key in mine:
        if key in left:
            continue
        if pins.get(key):
            held = f"which a lookup pinned {pins[key]} time(s)"
        elif refs.get(key):
            held = f"which {refs[key]} GPU transfer(s) still reference"
        else:
            continue
        return (
            f"yours chose {mine}, with {key!r}, {held}: such a chunk is not evictable, "
            "and _choose_victims skips it (a chunk stays while pinned or referenced beyond "
            "the tier's own reference)"
        )
    return None


def shown(value: Any) -> Any:
    try:
        return ast.literal_eval(value) if isinstance(value, str) else value
    except (ValueError, SyntaxError):
        return value


RULES = {
    "lookup": (_lookup_stopped_short,),
    "put": (_put_resident, _too_large_kept, _put_bytes, victims_without_bytes, miss_recorded),
    "_choose_victims": (_victim_held, _refused_counted, _victims_short, _stopped_at_refused),
    "store": (_store_missed_below, _store_dropped_below),
    "_cascade": (_cascade_reordered,),
    "pin": (_count_moved_order,),
    "unpin": (_count_moved_order,),
    "ref": (_count_moved_order,),
    "unref": (_count_moved_order,),
    "retrieve": (_promotion_moved,),
    "recompute_seconds": (_attention_linear,),
}


def rule_reading(d: Difference) -> str | None:
    """The first of the method's certain readings that fits, or None."""
    for read in (*RULES.get(d.method, ()), *PROOFS.get(d.method, ())):
        found: str | None = read(d)
        if found is not None:
            return found
    return None
