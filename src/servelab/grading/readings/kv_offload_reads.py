"""Readings of a hierarchy's reads, each proved by running yours on a copy of the state
under where: the tier a held_bytes asked a chunk's size of, and the order a retrieve
returned its payloads in; and the tier a release took a pin off."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["held_size_asked", "read_elsewhere", "retrieve_order", "unpinned_elsewhere"]


def _asked_sizes(h: Any) -> tuple[list[tuple[int, Any, bool]], BaseException | None]:
    """Yours' held_bytes run on ``h`` with every tier's ``size_of`` watched: the (tier index,
    key, answered) of each size asked, and what the call raised."""
    asked: list[tuple[int, Any, bool]] = []

    def watch(i: int, tier: Any) -> None:
        size_of = tier.size_of

        def watched(key: Any) -> Any:
            try:
                size = size_of(key)
            except Exception:
                asked.append((i, key, False))
                raise
            asked.append((i, key, True))
            return size

        tier.size_of = watched

    for i, tier in enumerate(h.tiers):
        watch(i, tier)
    try:
        with line_budget(LINES_PER_CALL):
            h.held_bytes()
    except Exception as exc:
        return asked, exc
    return asked, None


def held_size_asked(d: Difference) -> str | None:
    """Yours' held_bytes raised KeyError asking a tier for the size of a chunk that tier does
    not hold and another tier does: seen on a copy, through that tier's own ``size_of``."""
    if d.method != "held_bytes" or not d.i_raised or d.they_raised:
        return None
    if not d.error("mine").startswith("KeyError"):
        return None
    try:
        h = copy.deepcopy(d.subject)
        asked, raised = _asked_sizes(h)
    except (Exception, OutOfLines):
        return None
    if not isinstance(raised, KeyError) or not asked or asked[-1][2]:
        return None
    i, key, _ = asked[-1]
    tiers = h.tiers
    holders = [t.name for t in tiers if key in t.keys()]
    if key in tiers[i].keys() or not holders or raised.args[:1] != (key,):
        return None
    same = all(j == i for j, _, _ in asked)
    return (
        f"yours asked the {tiers[i].name} tier for the size of {key!r} "
        f"(`tiers[{i}].size_of({key!r})`, the KeyError), a chunk only the "
        f"{' and '.join(holders)} tier holds"
        + (f"; every size yours asked for, it asked of the {tiers[i].name} tier" if same else "")
        + ": take each chunk's size from a tier that holds it"
    )


def retrieve_order(d: Difference) -> str | None:
    """Yours' retrieve returned the payloads of the found chunks, each once, in another order
    than found's: seen by running yours and the reference's on copies of the state."""
    from servelab.grading.mistakes import correct_impl

    found = d.args[0] if d.args and isinstance(d.args[0], list) else None
    if d.method != "retrieve" or not found or d.i_raised or d.they_raised:
        return None
    if not all(isinstance(f, tuple) and len(f) == 2 for f in found):
        return None
    outcome, mine = d.probe("retrieve", found)
    try:
        with line_budget(LINES_PER_CALL):
            theirs = correct_impl("kv-offload")["Hierarchy"].retrieve(
                copy.deepcopy(d.subject), list(found)
            )
    except (Exception, OutOfLines):
        return None
    if outcome != "returned" or not isinstance(mine, list) or not isinstance(theirs, list):
        return None
    if len(set(map(bytes, theirs))) != len(theirs) or mine == theirs:
        return None
    if sorted(map(bytes, mine)) != sorted(map(bytes, theirs)):
        return None
    keys = [found[theirs.index(p)][0] for p in mine]
    by_tier = [k for k, _ in sorted(found, key=lambda f: f[1])]
    return (
        f"yours returned the found chunks' payloads in another order: those of {keys} for "
        f"found {[k for k, _ in found]}"
        + (", the faster tier's first" if keys == by_tier else "")
        + ": retrieve returns each payload at its chunk's place in found (the prefix's "
        "order), whichever tier it was read from"
    )


def unpinned_elsewhere(d: Difference, found: list[Any]) -> str | None:
    """Yours took a found chunk's pin off another tier than the one found names, and left the
    named tier's pin, where the reference took it off the named tier."""
    tiers = [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]

    def off(side: Any, tier: str, key: Any) -> int:
        had = (d.before.get(f"{tier}.pins") or {}).get(key, 0)
        return int(had - (side.get(f"{tier}.pins") or {}).get(key, 0))

    for entry in found:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], int)):
            continue
        key, i = entry
        if (
            not 0 <= i < len(tiers)
            or off(d.mine, tiers[i], key)
            or not off(d.theirs, tiers[i], key)
        ):
            continue
        for tier in tiers:
            if tier != tiers[i] and off(d.mine, tier, key) > off(d.theirs, tier, key):
                return (
                    f"yours took the pin on {key!r} off the {tier} tier, which holds it too, "
                    f"and left the one in the {tiers[i]} tier, the tier found names "
                    f"({entry!r}), where its lookup pinned it: release unpins each chunk in "
                    f"the tier found names; the {tier} tier's pin is not this lookup's"
                )
    return None


def _gets(h: Any, found: list[Any]) -> list[tuple[int, Any]] | None:
    """Yours' retrieve run on ``h`` with every tier's ``get`` watched (a get inside the
    tier's own put, a put of a resident key, not counted): the (tier index, key) of each
    read; None when it raised."""
    read: list[tuple[int, Any]] = []

    def watch(i: int, tier: Any) -> None:
        get, put, inside = tier.get, tier.put, [0]

        def watched_get(key: Any) -> Any:
            if not inside[0]:
                read.append((i, key))
            return get(key)

        def watched_put(*args: Any, **kwargs: Any) -> Any:
            inside[0] += 1
            try:
                return put(*args, **kwargs)
            finally:
                inside[0] -= 1

        tier.get, tier.put = watched_get, watched_put

    try:
        for i, tier in enumerate(h.tiers):
            watch(i, tier)
        with line_budget(LINES_PER_CALL):
            h.retrieve(found)
    except Exception:
        return None
    except OutOfLines:
        return None
    return read


def read_elsewhere(d: Difference) -> str | None:
    """Yours moved a chunk in the order of a tier the lookup did not find it in, and a replay
    of the call with each tier's get watched shows yours read it there with get (a use)."""
    found = d.args[0] if d.args else None
    if d.i_raised or d.they_raised or not isinstance(found, list):
        return None
    names = [k[: -len(".keys")] for k in d.before if k.endswith(".keys")]
    where: dict[Any, int] = {}
    for entry in found:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], int)):
            return None
        where.setdefault(entry[0], entry[1])
    try:
        reads = _gets(copy.deepcopy(d.subject), copy.deepcopy(found))
    except Exception:
        return None
    for i, name in enumerate(names):
        mine, theirs = d.mine.get(f"{name}.keys"), d.theirs.get(f"{name}.keys")
        if not isinstance(mine, list) or not isinstance(theirs, list) or mine == theirs:
            continue
        if sorted(mine, key=repr) != sorted(theirs, key=repr) or not mine:
            continue
        key = mine[-1]
        moved = [k for k in theirs if k != key] + [key] == mine
        if not moved or key not in where or where[key] == i or reads is None:
            continue
        if (i, key) not in reads or not 0 <= where[key] < len(names):
            continue
        return (
            f"yours read {key!r} with get in the {name} tier too (a replay of the call watched "
            f"each tier's get), though the lookup found it in the {names[where[key]]} tier: a "
            f"get is a use, so under LRU the {name} copy moved to the newest end. A retrieve "
            "reads each chunk in the tier the lookup returned; a copy elsewhere keeps its place"
        )
    return None


def _pins_and_unpins(h: Any, keys: Any) -> list[tuple[str, int, Any]] | None:
    """Yours' lookup run on ``h`` with every tier's pin and unpin watched: ("pin" or
    "unpin", tier index, key) in call order; None when it raised."""
    calls: list[tuple[str, int, Any]] = []

    def watch(i: int, tier: Any) -> None:
        for name in ("pin", "unpin"):
            own = getattr(tier, name)

            def watched(key: Any, own: Any = own, name: str = name) -> Any:
                calls.append((name, i, key))
                return own(key)

            setattr(tier, name, watched)

    try:
        for i, tier in enumerate(h.tiers):
            watch(i, tier)
        with line_budget(LINES_PER_CALL):
            h.lookup(keys)
    except Exception:
        return None
    except OutOfLines:
        return None
    return calls


def pins_taken_back(d: Difference, kept: list[Any]) -> str | None:
    """Yours returned a shorter prefix than ``kept`` (the reference's found keys), and a
    replay of the call with pin and unpin watched shows yours pinned the keys it left out and
    unpinned them again before it returned."""
    keys = d.args[0] if d.args else None
    if not isinstance(keys, list) or not kept:
        return None
    try:
        calls = _pins_and_unpins(copy.deepcopy(d.subject), list(keys))
    except Exception:
        return None
    if calls is None:
        return None
    pinned = [(i, k) for name, i, k in calls if name == "pin"]
    unpinned = [(i, k) for name, i, k in calls if name == "unpin"]
    back = [k for i, k in pinned if (i, k) in unpinned and k in kept]
    if not back or len(unpinned) != len(set(unpinned)):
        return None
    missing = next((k for k in keys if k not in kept), None)
    at = f" ({missing!r} here)" if missing is not None else ""
    return (
        f"yours pinned {', '.join(map(repr, back))} and took the pin(s) back before it "
        "returned (a replay of the call watched pin and unpin): a lookup keeps the pins of "
        f"the longest prefix some tier holds, and stops at the first key no tier holds{at}"
    )
