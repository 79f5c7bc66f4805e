"""Readings of a retrieve or a store that leaves the CPU tier other than the reference does,
each proved by replay on copies of your hierarchy: yours must leave every tier as one
variant of the reference's call does (a promotion made only into free bytes; victims that
cascade from the CPU tier itself, ``_cascade(0, ...)``), both on the failing call and on a
second state built to part them (one chunk found on disk, a CPU tier full of two unpinned
chunks or with room for it), and not as the other variant does there."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.testing.kv_offload import hierarchy_fields, payload_for

__all__ = ["PROMOTE_PROOFS"]

_FREE, _TOP = "free", "top"


def _cascade_from_top(h: Any, chunks: Any) -> None:
    from servelab.grading.mistakes import correct_impl

    correct_impl("kv-offload")["Hierarchy"]._cascade(h, 0, chunks)


def _retrieve(h: Any, found: list[Any], way: str) -> None:
    """The reference's retrieve with its promotion made ``way``: only into free bytes, or
    with the victims cascading from the top tier itself."""
    payloads = []
    for key, i in found:
        h.tiers[i].ref(key)
        payloads.append(h.tiers[i].get(key))
    top = h.tiers[0]
    for (key, i), payload in zip(found, payloads, strict=True):
        if i > 0 and key not in top and len(payload) <= top.capacity:
            if way == _FREE:
                if len(payload) <= top.free:
                    top.put(key, payload)
                continue
            evicted = top.put(key, payload)
            if evicted:
                _cascade_from_top(h, evicted)
    for key, i in found:
        h.tiers[i].unref(key)
        h.tiers[i].unpin(key)


def _store(h: Any, key: Any, payload: Any, way: str = _TOP) -> None:
    """The reference's store with its victims cascading from the top tier itself."""
    evicted = h.tiers[0].put(key, payload)
    if evicted:
        _cascade_from_top(h, evicted)


def _after(h: Any, step: Callable[[Any], Any]) -> dict[str, Any] | None:
    """The fields of a copy of ``h`` after ``step`` ran on it; None when it raised."""
    try:
        again = copy.deepcopy(h)
        with line_budget(LINES_PER_CALL):
            step(again)
        return hierarchy_fields(again)
    except Exception:
        return None
    except OutOfLines:
        return None


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    return a is not None and b is not None and a == b


def _separating(cls: Any, held: str) -> tuple[Any, list[Any]] | None:
    """A fresh hierarchy of yours: the chunks ``held`` (30 B each) in the CPU tier of 60 B,
    'a' on disk and found by a lookup."""
    try:
        with line_budget(LINES_PER_CALL):
            h = cls(60, 120)
            h.tiers[1].put("a", payload_for("a", 30))
            for key in held:
                h.tiers[0].put(key, payload_for(key, 30))
            found = h.lookup(["a"])
    except Exception:
        return None
    except OutOfLines:
        return None
    return (h, found) if list(found) == [("a", 1)] else None


def _yours_retrieve(cls: Any, found: list[Any]) -> Callable[[Any], Any]:
    return lambda h: cls.retrieve(h, list(found))


def _variant(found: list[Any], way: str) -> Callable[[Any], Any]:
    return lambda h: _retrieve(h, list(found), way)


def _retrieve_like(d: Difference, way: str) -> bool:
    """Yours leaves every tier as the ``way`` variant does, on the failing call and on both
    separating states, and not as the other variant does on one of them."""
    h = d.subject
    if not d.args or not isinstance(d.args[0], list):
        return False
    found = list(d.args[0])
    other = _TOP if way == _FREE else _FREE
    mine = _after(h, lambda x: type(h).retrieve(x, list(found)))
    if not _same(mine, _after(h, lambda x: _retrieve(x, found, way))):
        return False
    parted = False
    for held in ("bc", "b"):  # the CPU tier full of unpinned chunks; with room for 'a'
        state = _separating(type(h), held)
        if state is None:
            return False
        s, s_found = state
        yours = _after(s, _yours_retrieve(type(h), s_found))
        if not _same(yours, _after(s, _variant(s_found, way))):
            return False
        parted = parted or not _same(yours, _after(s, _variant(s_found, other)))
    return parted


def _store_parted(cls: Any) -> bool:
    """On a fresh hierarchy of yours whose CPU tier 'b' and 'c' fill, a store of 'a' leaves
    every tier as the variant does, and not as the reference's store does."""
    from servelab.grading.mistakes import correct_impl

    try:
        with line_budget(LINES_PER_CALL):
            h = cls(60, 120)
            for key in "bc":
                h.tiers[0].put(key, payload_for(key, 30))
    except Exception:
        return False
    except OutOfLines:
        return False
    chunk = payload_for("a", 30)
    reference = correct_impl("kv-offload")["Hierarchy"]
    yours = _after(h, lambda x: cls.store(x, "a", chunk))
    like = _after(h, lambda x: _store(x, "a", chunk, _TOP))
    unlike = _after(h, lambda x: reference.store(x, "a", chunk))
    return _same(yours, like) and not _same(yours, unlike)


def _usable(d: Difference) -> bool:
    tiers: Any = getattr(d.subject, "tiers", None)
    return bool(tiers) and len(tiers) >= 2 and d.same_outcome and not d.i_raised


def _free_room_only(d: Difference) -> str | None:
    """A chunk found below, which the reference promotes by evicting, left out of the CPU
    tier: yours promotes only into free bytes."""
    if d.method != "retrieve" or not _usable(d) or not _retrieve_like(d, _FREE):
        return None
    top = d.subject.tiers[0].name
    return (
        f"yours promotes a chunk found below only into the {top} tier's free bytes (it "
        f"leaves every tier as such a retrieve would, here and with the {top} tier full of "
        f"unpinned chunks or with room): a promotion is a put like any other, which evicts "
        f"in policy order to make room, the victims cascading down"
    )


def _from_the_top(d: Difference) -> str | None:
    """Yours leaves every tier as the reference's call would if its victims cascaded from
    the CPU tier itself: a victim written back into the tier that evicted it."""
    if d.method not in ("store", "retrieve") or not _usable(d):
        return None
    h = d.subject
    if d.method == "retrieve":
        if not _retrieve_like(d, _TOP):
            return None
    else:
        if len(d.args) != 2:
            return None
        key, payload = d.args
        mine = _after(h, lambda x: type(h).store(x, key, payload))
        if not _same(mine, _after(h, lambda x: _store(x, key, payload, _TOP))):
            return None
        if not _store_parted(type(h)):
            return None
    top = h.tiers[0].name
    return (
        f"yours leaves every tier as the reference's {d.method} would if its victims "
        f"cascaded from the {top} tier itself (`_cascade(0, ...)`): a victim of the {top} "
        f"tier is written back into the {top} tier, where it evicts another. What a tier "
        f"evicts cascades into the tiers below it, from the next one down (`_cascade(1, ...)`)"
    )


PROMOTE_PROOFS = {"retrieve": (_from_the_top, _free_room_only), "store": (_from_the_top,)}
