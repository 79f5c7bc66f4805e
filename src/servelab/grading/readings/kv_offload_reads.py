"""Readings of a hierarchy's reads, each proved by running yours on a copy of the state
under where: the tier a held_bytes asked a chunk's size of, and the order a retrieve
returned its payloads in; and the tier a release took a pin off."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["held_size_asked", "retrieve_order", "unpinned_elsewhere"]


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
