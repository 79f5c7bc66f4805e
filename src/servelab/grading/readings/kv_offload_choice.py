"""Readings of a ``_choose_victims`` that differs at a chunk ``can_evict`` refuses, each proved
by calling yours again on a copy of the tier with ``can_evict`` watched: which chunks yours
asked about, in what order, and what it was told. A chunk that is refused frees nothing, and
the reference goes on past it to the next one in policy order."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["miss_recorded", "refused_counted", "stopped_at_refused", "victims_without_bytes"]


def _asked(d: Difference) -> tuple[Any, list[tuple[Any, bool]]] | None:
    """Yours ``_choose_victims`` called again on a copy of the tier as it was before the
    call, with its ``can_evict`` watched: (what it returned, [(key asked, the answer)])."""
    try:
        tier = copy.deepcopy(d.subject)
        own, asked = tier.can_evict, []

        def watched(key: Any) -> Any:
            answer = own(key)
            asked.append((key, answer))
            return answer

        tier.can_evict = watched
        with line_budget(LINES_PER_CALL):
            got = tier._choose_victims(*d.args)
    except Exception:
        return None
    except OutOfLines:
        return None
    return got, asked


def _agrees_unheld(d: Difference) -> bool:
    """Yours, called again on a copy of the tier with every pin and transfer reference
    dropped (nothing refused), chooses what the rule does: the policy order's chunks from the
    front until the free bytes and theirs fit the chunk."""
    size = d.args[0] if d.args else None
    try:
        tier = copy.deepcopy(d.subject)
        tier._pins.clear()
        tier._refs.clear()
        need, want = size - tier.free, []
        for key in tier.keys():
            if need <= 0:
                break
            want.append(key)
            need -= tier.size_of(key)
        with line_budget(LINES_PER_CALL):
            got = tier._choose_victims(size)
    except Exception:
        return False
    except OutOfLines:
        return False
    return bool(got == (want if need <= 0 else None))


def _sizes(d: Difference) -> tuple[int, list[Any], dict[Any, int]] | None:
    """The tier's free bytes, its keys in policy order and their sizes, before the call."""
    t: Any = d.subject
    try:
        order = list(t.keys())
        return t.capacity - t.used, order, {k: t.size_of(k) for k in order}
    except Exception:
        return None


def stopped_at_refused(d: Difference) -> str | None:
    """Yours answered None (no room) where the reference chooses victims, and the watched
    replay shows it asked can_evict of the policy order's chunks up to the first it refused
    and of none after it, though the reference's victims lie after it."""
    theirs = d.returned("theirs")
    if d.returned("mine") != "None" or not isinstance(theirs, str) or not theirs.startswith("["):
        return None
    watched, sizes = _asked(d), _sizes(d)
    if watched is None or sizes is None or watched[0] is not None:
        return None
    _, order, _ = sizes
    _, asked = watched
    keys = [k for k, _ in asked]
    if not asked or asked[-1][1] or keys != order[: len(keys)] or len(keys) == len(order):
        return None
    if any(not answer for _, answer in asked[:-1]) or not _agrees_unheld(d):
        return None  # it went past a refusal before, or it errs with nothing refused
    refused = keys[-1]
    rest = order[len(keys) :]
    return (
        f"yours answered None once can_evict refused {refused!r}, and asked it of no chunk "
        f"after that one ({', '.join(map(repr, rest))} in policy order; a replay of the call "
        f"watched can_evict): a chunk can_evict refuses is skipped, and the choice goes on "
        f"with the next one, which makes room here ({theirs}). With nothing pinned or "
        "referenced, yours chooses as the rule does"
    )


def refused_counted(d: Difference) -> str | None:
    """Yours chose victims that with the free bytes are short of the chunk, and stopped at a
    point where they are enough only with the bytes of the chunks can_evict refused on the
    way (the watched replay shows which it asked and was refused): those bytes counted as
    freed."""
    size = d.args[0] if d.args else None
    watched, sizes = _asked(d), _sizes(d)
    if watched is None or sizes is None or not isinstance(size, int):
        return None
    free, order, bytes_of = sizes
    got, asked = watched
    if not isinstance(got, list) or any(k not in bytes_of for k in got):
        return None
    chosen = free + sum(bytes_of[k] for k in got)
    refused = [k for k, answer in asked if not answer and k in bytes_of]
    if chosen >= size or not refused or [k for k, _ in asked] != order[: len(asked)]:
        return None
    counted = [bytes_of[k] for k, _ in asked]
    if sum(counted[:-1]) + free >= size or sum(counted) + free < size:
        return None  # it did not stop where the refused bytes first made the room
    if not _agrees_unheld(d):
        return None
    held = ", ".join(f"{k!r} ({bytes_of[k]} bytes)" for k in refused)
    return (
        f"yours chose {got!r} and stopped where the {free} free bytes, its victims' "
        f"{chosen - free} and the bytes of {held}, which can_evict refused, first reach the "
        f"{size} the chunk needs (a replay of the call watched can_evict; with nothing pinned "
        "or referenced yours chooses as the rule does): a chunk can_evict refuses stays, so "
        "its bytes are not freed and do not count toward the room; when what can_evict "
        "allows cannot make room, _choose_victims returns None and the put misses"
    )


def victims_without_bytes(d: Difference) -> str | None:
    """Yours, called again on a copy, hands back the reference's victims in order, each
    with something other than bytes where its payload belongs."""
    theirs = d.returned("theirs")
    if d.i_raised or d.they_raised or not isinstance(theirs, str) or not theirs.startswith("[("):
        return None
    got = d.probe("put", *d.args)
    pairs = got[1] if got[0] == "returned" else None
    if not isinstance(pairs, list) or not pairs:
        return None
    if not all(type(e) is tuple and len(e) == 2 for e in pairs):
        return None
    keys = [k for k, _ in pairs]
    odd = [(k, v) for k, v in pairs if not isinstance(v, bytes | bytearray)]
    if not odd or any(f"({k!r}, b" not in theirs for k in keys):
        return None
    key, value = odd[0]
    return (
        f"yours handed back {key!r} with a {type(value).__name__}, not its payload's bytes: "
        "a victim goes back as (key, payload), the bytes read from its copy with "
        "`self._read(key)` before it is discarded, so that the tier below can write them"
    )


def miss_recorded(d: Difference) -> str | None:
    """Both returned None (a miss), the reference changing nothing, and yours left the new
    key in its books: the chunk recorded before the put knew it had room."""
    key = d.args[0] if d.args else None
    if d.returned("mine") != "None" or d.returned("theirs") != "None" or d.changed("theirs"):
        return None
    before, mine = d.before.get("keys"), d.mine.get("keys")
    if not isinstance(before, list) or not isinstance(mine, list):
        return None
    if key in before or key not in mine:
        return None
    was, now = d.before.get("used"), d.mine.get("used")
    used = f", `used` {was} -> {now}" if was != now else ""
    return (
        f"yours returned None (a miss) and yet left {key!r} in `keys`{used}: a miss leaves "
        "the tier as it was, so a put records the chunk only once its victims have made "
        "room (and after its copy is written)"
    )
