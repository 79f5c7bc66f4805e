"""A choice of victims made while the tier's free bytes already hold the chunk: the numbers
(free bytes, size) and the rule need = size - free; that yours frees the chunk's whole size,
ignoring the free bytes, said only where a replay on a fresh tier of yours shows it."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference, written_for
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

FREE_HOLDS = written_for()
"""A ``_choose_victims`` whose reference answer is [] because the free bytes hold the chunk."""

_CAPACITY, _HELD = 10, 4
"""The replay's tier: 10 bytes holding one chunk of 4 (6 free)."""


def free_holds_chunk(d: Difference) -> str | None:
    """Yours found no room (None) or chose victims where the free bytes before the call
    already hold the chunk (the reference evicts nothing): read off the call's numbers."""
    mine, theirs = d.returned("mine"), d.returned("theirs")
    size = d.args[0] if d.args else None
    used = d.before.get("used")
    capacity = getattr(d.subject, "capacity", None)
    if theirs != "[]" or mine in (None, "[]") or not FREE_HOLDS.fits(d):
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (size, used, capacity)):
        return None
    assert isinstance(size, int) and isinstance(used, int) and isinstance(capacity, int)
    free = capacity - used
    if size < 1 or free < size:
        return None
    did = "answered None (no room)" if mine == "None" else f"chose {mine} to evict"
    said = (
        f"yours {did} for a chunk of {size} bytes with {free} of the tier's {capacity} bytes "
        f"free, which already hold it: only what the free bytes lack needs victims, need = "
        f"size - free, here {size} - {free} = {size - free}, so nothing is evicted and the "
        "answer is []"
    )
    return said + (_whole_size(d) or "")


def _whole_size(d: Difference) -> str | None:
    """Proof that yours frees the chunk's whole size whatever is free: on a fresh tier of
    yours of 10 bytes holding 'a' (4 bytes, 6 free, stored by your own put with no victim
    needed), yours chooses ['a'] for a chunk of 4 bytes and answers None for one of 5 (the
    only evictable bytes, 4, fall short of 5 though 6 are free). A room test that counts the
    used bytes as free, or keeps a margin, answers otherwise on one of the two."""
    try:
        policy = getattr(d.subject, "policy", "LRU")
        with line_budget(LINES_PER_CALL):
            tier: Any = type(d.subject)(_CAPACITY, policy=policy)
            tier._choose_victims = lambda size: []  # 4 bytes into an empty tier: nothing to evict
            stored = tier.put("a", bytes(_HELD))
            del tier._choose_victims
            if stored != [] or list(tier.keys()) != ["a"] or tier.used != _HELD:
                return None
            exact = tier._choose_victims(_HELD)
            more = tier._choose_victims(_HELD + 1)
    except (Exception, OutOfLines):
        return None
    if exact != ["a"] or more is not None:
        return None
    free = _CAPACITY - _HELD
    return (
        f". Replayed on a fresh tier of yours, {_CAPACITY} bytes holding 'a' ({_HELD} bytes, "
        f"{free} free): yours chose ['a'] for a chunk of {_HELD} bytes and answered None for "
        f"one of {_HELD + 1}, so yours frees the chunk's whole size (need = size), ignoring "
        "the free bytes"
    )
