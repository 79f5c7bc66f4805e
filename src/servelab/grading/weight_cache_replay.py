"""How diagnosis replays the programs of topic ``weight-cache``: names, state, values, and the
programs that tell its known mistakes apart (:mod:`servelab.grading.diagnose`).

Apart from :mod:`servelab.grading.weight_cache` only to keep each file short enough to read in
one sitting; the topic declares :data:`REPLAY` as its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from servelab.grading.observe import Canon, frozen, weight_cache_fields
from servelab.grading.readings.weight_cache import weight_cache_reading
from servelab.grading.replay import TopicReplay, plain, program

__all__ = ["REPLAY", "SEPARATING"]


def _weight_cache_ns(impl: Any) -> dict[str, Any]:
    return {"WeightCache": impl}


def _weight_cache_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    cache = ns.get("cache")
    return None if cache is None else frozen(weight_cache_fields(cache))


SEPARATING = (
    program(  # LRU evicts the small old entry first, then the large one; not the newest
        "cache = WeightCache(100)",
        "cache.put('a', '<a weights>', 10)",
        "cache.put('b', '<b weights>', 60)",
        "cache.put('c', '<c weights>', 20)",
        "cache.put('d', '<d weights>', 30)",
        "cache.keys()",
    ),
    program(  # a hit and an unpin, then one eviction
        "cache = WeightCache(80)",
        "cache.put('a', '<a weights>', 40)",
        "cache.put('b', '<b weights>', 40)",
        "cache.pin('a')",
        "cache.pin('a')",
        "cache.unpin('a')",
        "cache.get('b')",
        "cache.put('c', '<c weights>', 40)",
        "cache.unpin('a')",
        "cache.get('b')",
        "cache.put('d', '<d weights>', 40)",
        "cache.keys()",
    ),
    program(  # every rule once: hits, misses, pins, the errors, an entry as large as the budget
        "cache = WeightCache(100)",
        *[f"cache.put({k!r}, '<{k} weights>', 10)" for k in "abcde"],
        "cache.get('a')",
        "cache.get('zz')",
        "cache.put('f', '<f weights>', 60)",
        "cache.pin('llama')",
        "cache.put('llama', '<llama weights>', 10)",
        "cache.pin('llama')",
        "cache.put('big', '<big weights>', 95)",
        "cache.put('huge', '<huge weights>', 150)",
        "cache.put('llama', '<llama weights>', 20)",
        "cache.unpin('llama')",
        "cache.unpin('llama')",
        "cache.put('whole', '<whole weights>', 100)",
        "cache.keys()",
    ),
    program(  # equal sizes: only the recency order decides
        "cache = WeightCache(90)",
        "cache.put('a', '<a weights>', 30)",
        "cache.put('b', '<b weights>', 30)",
        "cache.put('c', '<c weights>', 30)",
        "cache.put('a', '<a weights>', 30)",
        "cache.put('d', '<d weights>', 30)",
        "cache.keys()",
    ),
)

REPLAY = TopicReplay(
    "cache",
    _weight_cache_ns,
    _weight_cache_state,
    lambda v, c: plain(v),
    error_detail=lambda exc: "llama" in str(exc),  # a MemoryError names the pinned key
    separating=SEPARATING,
    subject="cache",
    classes=("WeightCache",),
    fields=weight_cache_fields,
    reader=weight_cache_reading,
)
