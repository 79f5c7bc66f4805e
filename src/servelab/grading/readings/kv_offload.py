"""Readings of a KV tier's or hierarchy's first diverging call: what a put evicts, what may be
evicted, how pins count, what the node holds."""

from __future__ import annotations

import ast
from typing import Any

from servelab.grading.readings.difference import Difference, failed_call


def _field(state: Any, name: str) -> Any:
    """A tier's field, whether the state is a tier's (``keys``) or a hierarchy's top tier's
    (``cpu.keys``)."""
    if name in state:
        return state[name]
    return next((v for k, v in state.items() if k.endswith("." + name)), None)


def _shown(value: Any) -> Any:
    try:
        return ast.literal_eval(value) if isinstance(value, str) else value
    except (ValueError, SyntaxError):
        return value


def _put(d: Difference) -> str | None:
    before = _field(d.before, "keys") or []
    mine, theirs = _field(d.mine, "keys") or [], _field(d.theirs, "keys") or []
    gone_mine = [k for k in before if k not in mine]
    gone_theirs = [k for k in before if k not in theirs]
    size = len(d.args[1]) if len(d.args) > 1 and isinstance(d.args[1], bytes) else None
    if d.returned("mine") == "None" and gone_mine:
        return (
            f"yours evicted {gone_mine} before deciding whether room can be made, and then "
            "missed (None): choose every victim first (_choose_victims), and evict only when "
            "they make room; a miss changes nothing"
        )
    if d.returned("mine") == "None" and d.returned("theirs") not in (None, "None"):
        room = f"once {gone_theirs} is evicted" if gone_theirs else "without evicting anything"
        return (
            f"yours missed a chunk{f' of {size} bytes' if size else ''} that fits {room}: a "
            "put misses only when even every evictable chunk would not make room"
        )
    if len(gone_mine) > len(gone_theirs) and set(gone_theirs) <= set(gone_mine):
        return (
            f"yours evicted {gone_mine} where {gone_theirs} made room: evict in policy order "
            "only until the chunk fits, and no more"
        )
    return None


def _victims(d: Difference) -> str | None:
    mine, theirs = _shown(d.returned("mine")), _shown(d.returned("theirs"))
    if not isinstance(theirs, list) or mine == theirs:
        return None
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
    return None


def _can_evict(d: Difference) -> str | None:
    if d.returned("mine") != "True" or d.returned("theirs") != "False" or not d.args:
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
    if theirs == had + 1 and mine != theirs:
        return (
            f"yours left the pin count of {key!r} at {mine} after a pin on {had}: pins count, "
            "each pin adds one and each unpin takes one, so one lookup's unpin keeps another's hold"
        )
    return None


def _held_bytes(d: Difference) -> str | None:
    mine, theirs = _shown(d.returned("mine")), _shown(d.returned("theirs"))
    if not isinstance(mine, int) or not isinstance(theirs, int) or mine <= theirs:
        return None
    tiers = [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]
    seen: dict[Any, list[str]] = {}
    for tier in tiers:
        for key in d.before[f"{tier}.keys"]:
            seen.setdefault(key, []).append(tier)
    both = [k for k, where in seen.items() if len(where) > 1]
    if not both:
        return None
    return (
        f"yours returned {mine}, not {theirs}: {both} held in more than one tier are counted "
        "twice; held_bytes counts each chunk once, however many tiers hold a copy"
    )


_READERS = {
    "put": _put,
    "_choose_victims": _victims,
    "can_evict": _can_evict,
    "pin": _pin,
    "held_bytes": _held_bytes,
}


def kv_offload_reading(d: Difference) -> str | None:
    """The rule a tier's or a hierarchy's first diverging call breaks."""
    if d.hidden:
        return None
    found = failed_call(d)
    if found is not None:
        return found
    read = _READERS.get(d.method)
    return read(d) if read is not None else None
