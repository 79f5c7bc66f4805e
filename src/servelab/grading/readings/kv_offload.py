"""Readings of a KV tier's or hierarchy's first diverging call: what a put evicts, what may be
evicted, how pins count, what a release undoes, what the node holds, what a load costs."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import (
    MINE_RAISED,
    Difference,
    failed_call,
    written_for,
)
from servelab.grading.readings.kv_offload_cascade import victim_left_out
from servelab.grading.readings.kv_offload_dropped import dropped_at_one
from servelab.grading.readings.kv_offload_free import free_holds_chunk
from servelab.grading.readings.kv_offload_reads import (
    held_size_asked,
    read_elsewhere,
    retrieve_order,
    unpinned_elsewhere,
)
from servelab.grading.readings.kv_offload_rules import rule_reading, shown
from servelab.grading.readings.kv_offload_seconds import SECONDS_READERS
from servelab.grading.readings.kv_offload_sizes import payload_size
from servelab.grading.readings.kv_offload_used import used_on_put
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

# what each reading explains (a tier's ``cpu.pins`` counts as ``pins``); a direction or a value
# it needs is checked where it is read
PIN = written_for("pins")
CAN_EVICT = written_for()
CHOSEN = written_for()
HELD = written_for("held_bytes")  # the field that shows held_bytes() itself
RELEASE_RAISED = written_for("keys", "used", "pins", "refs", "held_bytes", outcomes=(MINE_RAISED,))
RELEASE = written_for("keys", "used", "pins", "refs", "held_bytes")
LOOKUP = written_for("pins")
RETRIEVE_REFS = written_for("refs", "pins", "keys", "used", "held_bytes")
PROMOTED = written_for("keys", "used", "pins", "refs", "held_bytes")


def _field(state: Any, name: str) -> Any:
    """A tier's field, whether the state is a tier's (``keys``) or a hierarchy's top tier's
    (``cpu.keys``)."""
    if name in state:
        return state[name]
    return next((v for k, v in state.items() if k.endswith("." + name)), None)


def _keys_for_pairs(d: Difference) -> list[Any] | None:
    """Yours returned the keys alone of the (key, payload) pairs the reference returns."""
    mine, theirs = shown(d.returned("mine")), d.returned("theirs")
    if not isinstance(mine, list) or not mine or not isinstance(theirs, str) or d.differ:
        return None
    pairs = theirs.startswith("[(") and all(f"({k!r}, " in theirs for k in mine)
    return mine if pairs and theirs.count("(") == len(mine) else None


def _put(d: Difference) -> str | None:
    before = _field(d.before, "keys") or []
    mine, theirs = _field(d.mine, "keys") or [], _field(d.theirs, "keys") or []
    gone_mine = [k for k in before if k not in mine]
    gone_theirs = [k for k in before if k not in theirs]
    size = len(d.args[1]) if len(d.args) > 1 and isinstance(d.args[1], bytes) else None
    capacity = getattr(d.subject, "capacity", None)
    too_large = d.error("mine").startswith("ChunkTooLarge") and not d.they_raised
    if too_large and size is not None and size == capacity:
        return (
            f"yours raised ChunkTooLarge for a chunk of {size} bytes in a tier of {capacity}: "
            "a chunk is too large only when it is larger than the whole tier (size > "
            "capacity); one of exactly the capacity fits"
        )
    keys = _keys_for_pairs(d)
    if keys is not None:
        return (
            f"yours returned the evicted keys {keys}: put returns the evicted (key, payload) "
            "pairs, so that the hierarchy can write each victim's bytes down a tier"
        )
    if d.returned("mine") == "None" and gone_mine:
        return (
            f"yours evicted {gone_mine} before deciding whether room can be made, and then "
            "missed (None): choose every victim first (_choose_victims), and evict only when "
            "they make room; a miss changes nothing"
        )
    if d.returned("mine") == "None" and d.returned("theirs") not in (None, "None"):
        if d.args and d.args[0] in before:
            asked = (
                " does yours test the room before it asks whether the key is here?"
                if _hit_with_room(d)
                else ""
            )
            return (
                f"{d.args[0]!r} is already here, and yours missed (None): a put of a key already "
                f"here is a use (as a get) and returns [], whatever the free bytes;{asked}"
            ).removesuffix(";")
        free = _free(d)
        if not gone_theirs and size is not None and free is not None and size > free:
            return None  # the reference made room some other way: no rule to state
        room = f"once {gone_theirs} is evicted" if gone_theirs else "in the free bytes"
        wait = d.args[2] if len(d.args) > 2 else 0
        exact = not gone_theirs and not d.changed("mine") and size and size > 1
        # yours takes a chunk one byte smaller, under any key: the size test is off
        if exact and size and _strict_fit(d, size):
            return (
                f"yours missed a chunk of {size} bytes that fits {room}, yet takes one of "
                f"{size - 1} bytes: a chunk fits while its size <= the free bytes (an "
                "exact fit fits); is your test strict (< where <= belongs)?"
            )
        if not gone_theirs and not d.changed("mine") and wait == 0 and _stores_on_retry(d):
            return (
                f"yours missed a chunk{f' of {size} bytes' if size else ''} that fits "
                f"{room}, with wait={wait}: a put always makes a first try, and wait counts the "
                "retries after it (wait + 1 tries in all); does your loop try only wait times?"
            )
        if not gone_theirs:
            return (
                f"yours missed a chunk{f' of {size} bytes' if size else ''} that fits {room}"
                f"{f' ({free} of {capacity})' if free is not None else ''}: a chunk that fits "
                "in the free bytes is stored, and put returns []"
            )
        return (
            f"yours missed a chunk{f' of {size} bytes' if size else ''} that fits {room}: a "
            "put misses only when even every evictable chunk would not make room"
        )
    if len(gone_mine) > len(gone_theirs) and set(gone_theirs) <= set(gone_mine):
        return (
            f"yours evicted {gone_mine} where {gone_theirs} made room: evict in policy order "
            "only until the chunk fits, and no more"
        )
    return used_on_put(d)


def _free(d: Difference) -> int | None:
    """The free bytes before the call, where the tier's capacity and used bytes are known."""
    used, capacity = _field(d.before, "used"), getattr(d.subject, "capacity", None)
    if not isinstance(used, int) or not isinstance(capacity, int):
        return None
    return capacity - used


def _strict_fit(d: Difference, size: int) -> bool:
    """Proof of a strict room test: an exact fit (the free bytes) missed, and yours stores a
    chunk one byte smaller without evicting,
    under the call's key and under another, longer one, and misses the exact fit under that
    one too: the size alone decides (a test that also counts the key's characters, or keeps a
    margin of more than a byte, answers otherwise)."""
    key, used = d.args[0], _field(d.before, "used")
    capacity = getattr(d.subject, "capacity", None)
    if not isinstance(used, int) or not isinstance(capacity, int) or size != capacity - used:
        return False  # an exact fit only: a miss of a smaller chunk is no strict test
    other = f"{key}_{key}_x" if isinstance(key, str) else None
    if other is None or other in (_field(d.before, "keys") or []):
        return False
    rest = d.args[2:]
    answers = (
        d.probe("put", key, bytes(size - 1), *rest),
        d.probe("put", other, bytes(size - 1), *rest),
    )
    exact = d.probe("put", other, bytes(size), *rest)
    return all(a == ("returned", []) for a in answers) and exact == ("returned", None)


def _stores_on_retry(d: Difference) -> bool:
    """Proof of a loop that tries only ``wait`` times: the same put with one retry allowed
    stores the chunk (a test that finds no room however often it looks misses again)."""
    again = d.probe("put", d.args[0], d.args[1], 1)
    return again[0] == "returned" and again[1] is not None


def _victims(d: Difference) -> str | None:
    mine, theirs = shown(d.returned("mine")), shown(d.returned("theirs"))
    if not isinstance(theirs, list) or mine == theirs or not CHOSEN.fits(d):
        return None
    if held := free_holds_chunk(d):
        return held
    if mine is None:  # a miss where the reference makes room: which rule, yours does not say
        return (
            f"yours answered None (no room) where the reference makes room by evicting "
            f"{theirs}: it takes victims in policy order, skipping what can_evict refuses, "
            "until the chunk fits, and misses only when no choice makes room"
        )
    if isinstance(mine, list) and len(mine) < len(theirs) and mine == theirs[: len(mine)]:
        return (
            f"yours chose {mine}, which leave too little room: choose victims in policy order "
            f"until the chunk fits (size <= free), {theirs} here"
        )
    if isinstance(mine, list) and len(mine) > len(theirs) and mine[: len(theirs)] == theirs:
        return (
            f"yours chose {mine} where {theirs} make room: evict in policy order only until "
            "the chunk fits, and no more"
        )
    if isinstance(mine, list) and theirs and theirs[0] not in mine:
        order = _field(d.before, "keys") or []
        return (
            f"yours chose {mine} where the reference chooses {theirs}: take victims from the "
            f"front of the policy order (keys(), {order} here, the next victim candidate "
            "first), skipping only what can_evict refuses"
        )
    return None


def _can_evict(d: Difference) -> str | None:
    if d.returned("mine") != "True" or d.returned("theirs") != "False" or not d.args:
        return None
    if not CAN_EVICT.fits(d):
        return None
    key = d.args[0]
    pins, refs = _field(d.before, "pins") or {}, _field(d.before, "refs") or {}
    if pins.get(key):
        return (
            f"yours may evict {key!r}, which a lookup pinned {pins[key]} time(s): a chunk with "
            "a pin is never evictable, whatever its transfers"
        )
    if refs.get(key):
        return (
            f"yours may evict {key!r}, still referenced by {refs[key]} GPU transfer(s): a chunk "
            "stays until every transfer is done, the tier's own reference the only one left"
        )
    return None


def _pin(d: Difference) -> str | None:
    key = d.args[0] if d.args else None
    had = (_field(d.before, "pins") or {}).get(key, 0)
    mine = (_field(d.mine, "pins") or {}).get(key, 0)
    theirs = (_field(d.theirs, "pins") or {}).get(key, 0)
    if theirs == had + 1 and mine != theirs and PIN.fits(d):
        return (
            f"yours left the pin count of {key!r} at {mine} after a pin on {had}: pins count, "
            "each pin adds one and each unpin takes one, so one lookup's unpin keeps another's hold"
        )
    return None


def _held_bytes(d: Difference) -> str | None:
    mine, theirs = shown(d.returned("mine")), shown(d.returned("theirs"))
    if not isinstance(mine, int) or not isinstance(theirs, int) or mine <= theirs:
        return None
    if not HELD.fits(d):
        return None
    tiers = [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]
    seen: dict[Any, list[str]] = {}
    for tier in tiers:
        for key in d.before[f"{tier}.keys"]:
            seen.setdefault(key, []).append(tier)
    both = [k for k, where in seen.items() if len(where) > 1]
    # counted twice exactly: yours is every tier's bytes added up, copies and all
    every = sum(d.before.get(f"{tier}.used") or 0 for tier in tiers)
    if not both or mine != every:
        return None
    return (
        f"yours returned {mine}, not {theirs}: {both} held in more than one tier are counted "
        "twice; held_bytes counts each chunk once, however many tiers hold a copy"
    )


def _tiers(d: Difference) -> list[str]:
    return [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]


def _found_elsewhere(d: Difference, found: list[Any]) -> tuple[str, str, str] | None:
    """A found chunk pinned in the tier its lookup found it in, and since then also held,
    unpinned, in a faster tier: (key, the tier found, the faster tier)."""
    tiers = _tiers(d)
    for entry in found:
        if not (isinstance(entry, tuple) and len(entry) == 2 and entry[1] in range(len(tiers))):
            continue
        key, i = entry
        if not (d.before.get(f"{tiers[i]}.pins") or {}).get(key):
            continue
        for faster in tiers[:i]:
            held = key in (d.before.get(f"{faster}.keys") or [])
            if held and not (d.before.get(f"{faster}.pins") or {}).get(key):
                return key, tiers[i], faster
    return None


def _release(d: Difference) -> str | None:
    """A hierarchy's release drops each found chunk's pin once, in the tier it was found in,
    and changes nothing else."""
    found = d.args[0] if d.args and isinstance(d.args[0], list) else []
    if RELEASE_RAISED.fits(d):
        error = d.error("mine")
        moved = _found_elsewhere(d, found) if error == "ChunkNotPinned" else None
        if moved:
            return (
                f"yours raised ChunkNotPinned: {moved[0]!r} is pinned in the {moved[1]} tier, "
                f"where the lookup found it; the {moved[2]} tier, which holds it now too, has "
                "no pin on it: release unpins each chunk in the tier its lookup found it in"
            )
        asked = (
            f"{error}, which removing a chunk still pinned raises: does yours remove chunks? "
            if error == "ChunkInUse"
            else f"{error} where the reference returns: "
        )
        return (
            f"yours raised {asked}release drops the lookup's pins and nothing more; the chunks "
            "stay cached for the next lookup"
        )
    if not RELEASE.fits(d):
        return None
    refs = [t for t in _tiers(d) if f"{t}.refs" in d.differ]
    if refs:
        return (
            f"yours changed the transfer references of the {refs[0]} tier: release drops the "
            "lookup's pins (unpin), not references (those are a transfer's, ref/unref)"
        )
    if other := unpinned_elsewhere(d, found):
        return other
    for tier in _tiers(d):
        had = d.before.get(f"{tier}.pins") or {}
        mine, theirs = d.mine.get(f"{tier}.pins") or {}, d.theirs.get(f"{tier}.pins") or {}
        kept = d.mine.get(f"{tier}.keys") or []
        gone = [k for k in d.before.get(f"{tier}.keys") or [] if k not in kept]
        if gone:
            return (
                f"yours removed {gone} from the {tier} tier: release drops the lookup's pins "
                "and nothing more; the chunks stay cached for the next lookup"
            )
        for key in sorted(set(had) | set(mine) | set(theirs), key=repr):
            a, b = mine.get(key, 0), theirs.get(key, 0)
            if a > b:
                return (
                    f"yours left {a} pin(s) on {key!r} in the {tier} tier, the reference {b}: "
                    "release unpins each (key, tier) the lookup returned once, in the tier it "
                    f"names ({found})"
                )
            if a < b:
                return (
                    f"yours took {had.get(key, 0) - a} pin(s) off {key!r} in the {tier} tier, "
                    f"the reference {had.get(key, 0) - b}: release unpins each found chunk "
                    "once, so another lookup's pin stays"
                )
    return None


def _extra_pins(d: Difference) -> list[tuple[str, Any]]:
    """(tier, key) pairs yours left pinned more than the reference did."""
    extra = []
    for tier in _tiers(d):
        mine, theirs = d.mine.get(f"{tier}.pins") or {}, d.theirs.get(f"{tier}.pins") or {}
        extra += [(tier, k) for k in sorted(mine, key=repr) if mine[k] > theirs.get(k, 0)]
    return extra


def _lookup(d: Difference) -> str | None:
    """A lookup pins each found chunk once, in the first (fastest) tier that holds it."""
    if not LOOKUP.fits(d):
        return None
    slower = _pinned_slower(d)
    if slower or not d.same_outcome:
        return slower or _found_index(d)
    extra = _extra_pins(d)
    if not extra:
        return None
    tier, key = extra[0]
    return (
        f"yours also pinned {key!r} in the {tier} tier: a lookup pins each chunk once, in the "
        f"first tier that holds it, the one it returns ({d.returned('theirs')}); a copy in a "
        "slower tier is not read, so it stays unpinned"
    )


def _found_index(d: Difference) -> str | None:
    """The same keys found and pinned as the reference's, one paired with another tier's index
    than the tier yours pinned it in."""
    mine, theirs, tiers = shown(d.returned("mine")), shown(d.returned("theirs")), _tiers(d)
    if d.differ or not isinstance(mine, list) or not isinstance(theirs, list):
        return None
    if len(mine) != len(theirs):
        return None
    for got, want in zip(mine, theirs, strict=True):
        ok = isinstance(got, tuple) and isinstance(want, tuple) and len(got) == len(want) == 2
        if not ok or got[0] != want[0]:
            return None
        key, where = want
        if got != want and isinstance(where, int) and 0 <= where < len(tiers):
            return (
                f"yours returned {got!r} for {key!r}, which yours pinned in the "
                f"{tiers[where]} tier (index {where}): lookup pairs each key with the index of "
                "the tier it pinned it in, the copy retrieve will read and unpin"
            )
    return None


def _pinned_slower(d: Difference) -> str | None:
    """Yours pinned a chunk in a slower tier than the first one that holds it, and pinned it
    nowhere else: the chunk is found, in the wrong tier."""
    if d.i_raised or d.they_raised:
        return None
    tiers = _tiers(d)
    for i, tier in enumerate(tiers):
        theirs = d.theirs.get(f"{tier}.pins") or {}
        for key in sorted(theirs, key=repr):
            was = (d.before.get(f"{tier}.pins") or {}).get(key, 0)
            if theirs[key] <= was or (d.mine.get(f"{tier}.pins") or {}).get(key, 0) > was:
                continue
            slower = [
                t
                for t in tiers[i + 1 :]
                if (d.mine.get(f"{t}.pins") or {}).get(key, 0)
                > (d.before.get(f"{t}.pins") or {}).get(key, 0)
            ]
            if slower:
                return (
                    f"yours pinned {key!r} in the {slower[0]} tier where the {tier} tier holds "
                    "it too: a lookup pins each chunk in the first (fastest) tier that holds "
                    "it, and returns that tier's index"
                )
    return None


def _lost(d: Difference) -> str | None:
    """A chunk the node held before the call, in no tier of yours after it, where the
    reference moved it down a tier: a victim of the faster tier dropped, not written down."""
    tiers = _tiers(d)
    if len(tiers) < 2:
        return None

    def held(state: Any) -> list[Any]:
        return [k for t in tiers for k in (state.get(f"{t}.keys") or [])]

    before, mine = held(d.before), held(d.mine)
    for key in before:
        if key in mine:
            continue
        below = [t for t in tiers[1:] if key in (d.theirs.get(f"{t}.keys") or [])]
        if below and key in (d.before.get(f"{tiers[0]}.keys") or []):
            return (
                f"yours lost {key!r}: it left the {tiers[0]} tier in this call (evicted to make "
                f"room) and is in no tier now, where the reference writes it down to the "
                f"{below[0]} tier. A chunk the {tiers[0]} tier evicts cascades down a tier, "
                f"whichever call made the room ({d.method} too)"
            )
    return None


def _retrieve(d: Difference) -> str | None:
    """A retrieve refs each copy for its transfer and unrefs it once read: none stays."""
    tiers = _tiers(d)
    if d.i_raised and not d.they_raised and d.error("mine") == "ChunkTooLarge" and tiers:
        return (
            f"yours raised ChunkTooLarge where the reference returns: a chunk found below "
            f"that is larger than the whole {tiers[0]} tier stays below, since retrieve "
            f"promotes a chunk only when it fits the {tiers[0]} tier at all "
            "(len(payload) <= capacity)"
        )
    if not RETRIEVE_REFS.fits(d):
        return None
    for tier in _tiers(d):
        mine, theirs = d.mine.get(f"{tier}.refs") or {}, d.theirs.get(f"{tier}.refs") or {}
        kept = [k for k in sorted(mine, key=repr) if mine[k] > theirs.get(k, 0)]
        if kept:
            return (
                f"yours left {mine[kept[0]]} transfer reference(s) on {kept[0]!r} in the {tier} "
                "tier after retrieve returned: each transfer refs the copy it reads and unrefs "
                "it when the copy is done, so retrieve leaves no reference behind"
            )
    return _not_promoted(d) or retrieve_order(d) or read_elsewhere(d)


def _not_promoted(d: Difference) -> str | None:
    """A chunk a retrieve found below the top tier is copied up into it (its evictions
    cascading down): yours left it out of the top tier where the reference promoted it."""
    tiers = _tiers(d)
    found = d.args[0] if d.args and isinstance(d.args[0], list) else []
    if len(tiers) < 2 or not d.same_outcome or not PROMOTED.fits(d):
        return None
    top = tiers[0]
    mine, theirs = d.mine.get(f"{top}.keys") or [], d.theirs.get(f"{top}.keys") or []
    for entry in found:
        key, where = entry if isinstance(entry, tuple) and len(entry) == 2 else (None, 0)
        if isinstance(where, int) and where > 0 and key in theirs and key not in mine:
            return (
                f"yours left {key!r} out of the {top} tier after retrieving it from the "
                f"{tiers[where] if where < len(tiers) else 'lower'} tier: a retrieve promotes "
                f"a chunk found below into the {top} tier (put, and what that evicts cascades "
                "down), so the next lookup finds it in the fastest tier"
            )
    return None


def _torn(d: Difference) -> str | None:
    """A write cut short (both raised, or yours by the simulated crash where the reference's
    write to that name was never cut) that left the chunk's own file shorter than its
    payload: a torn chunk under its final name, seen in the files themselves."""
    files, before = d.mine.get("files"), d.before.get("files") or {}
    payload = d.args[1] if len(d.args) > 1 else None
    crashed = d.they_raised or d.error("mine").startswith("SimulatedCrash")
    if not (d.i_raised and crashed) or not isinstance(files, dict) or not payload:
        return None
    name = f"{d.args[0]}.chunk"
    held = files.get(name)
    if not isinstance(held, int) or held == before.get(name) or held >= len(payload):
        return None
    return (
        f"yours left {name} holding {held} of its {len(payload)} bytes when the write was cut "
        "short: a torn chunk under its final name, which a restart would serve as KV. Write a "
        "temporary file in the same directory, flush and fsync it, then os.replace it over the "
        "chunk's name: a crash leaves the chunk absent or whole"
    )


def _held(d: Difference) -> str | None:
    return _held_bytes(d) or held_size_asked(d)


_READERS = {
    "lookup": _lookup,
    "retrieve": _retrieve,
    "release": _release,
    **SECONDS_READERS,
    "put": _put,
    "_choose_victims": _victims,
    "can_evict": _can_evict,
    "pin": _pin,
    "unpin": dropped_at_one,
    "unref": dropped_at_one,
    "held_bytes": _held,
    "_payload_size": payload_size,
    "_cascade": victim_left_out,
}


def kv_offload_reading(d: Difference) -> str | None:
    """The rule a tier's or a hierarchy's first diverging call breaks."""
    if d.hidden:
        return None
    torn = _torn(d) if d.method == "_write" else None
    if torn:
        return torn
    found = failed_call(d)
    if found is not None:
        return found
    lost = _lost(d) if d.policy == "Hierarchy" else None
    if lost:
        return lost
    certain = rule_reading(d)
    if certain:
        return certain
    read = _READERS.get(d.method)
    return read(d) if read is not None else None


def _hit_with_room(d: Difference) -> bool:
    """Whether your put, made again on a copy whose capacity leaves room for the chunk,
    answers the key already here as a use (not None): then only the room made it miss."""
    try:
        obj = copy.deepcopy(d.subject)
        obj.capacity = obj.capacity + sum(map(len, d.args[1:2]))
        with line_budget(LINES_PER_CALL):
            return obj.put(*d.args) is not None
    except (Exception, OutOfLines):
        return False
