"""A reading of an ``eviction_order()`` that lists a key more than once: each candidate has one
place in the order. Under LFU a heap keeps stale entries beside a key's current one, so the
question of listing them is asked there; the repeat itself is the fact shown."""

from __future__ import annotations

from collections.abc import Callable

from servelab.grading.readings.difference import Difference

__all__ = ["order_twice"]


def order_twice(d: Difference, who: str, names: Callable[[str | None], list[str]]) -> str | None:
    """The first key yours lists twice, where the reference lists each key once (``names``
    reads a shown list of keys)."""
    mine, theirs = names(d.returned("mine")), names(d.returned("theirs"))
    if not mine or len(set(theirs)) != len(theirs):
        return None
    again = next((k for k in mine if mine.count(k) > 1), None)
    if again is None:
        return None
    stale = (
        "; a heap keeps stale entries beside a key's current one: does yours list those too?"
        if who == "LFU"
        else ""
    )
    return (
        f"yours listed {again!r} {mine.count(again)} times ({d.returned('mine')}), where each "
        f"candidate has one place in the order ({d.returned('theirs')}){stale}"
    )
