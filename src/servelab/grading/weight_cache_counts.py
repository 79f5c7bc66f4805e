"""Step 5 probes of ``weight-cache``: the counters, and where an eviction is counted.

The notebook counts ``evictions`` and ``evicted_bytes`` in ``_evict``, the one place every
eviction passes; a count kept in ``put``'s loop agrees with it on every ``put``, so one probe
calls ``_evict`` itself (on a class that has one: a cache of another design counts wherever it
evicts). Each probe takes the topic's script class (``CacheScript``) as its first argument,
which keeps this module free of an import of the topic module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.testing.weight_cache import stats_of


def counts(script: Callable[[Any, int], Any], impl: Any) -> None:
    s = script(impl, 100)
    s.put("e", 30)  # its value is None: still a resident key, so a get of it is a hit
    s.put("a", 60)
    s.get("a")
    s.get("a")
    s.get("e")
    s.get("zz")
    s.put("b", 60)  # evicts a
    try:
        s.put("huge", 500)
    except ValueError:
        pass
    got = stats_of(s.cache)
    want = (3, 1, 1, 60)
    if got != want:
        raise s.fail(
            f"(hits, misses, evictions, evicted_bytes) is {got}, expected {want}; a get of a "
            "resident key is a hit even when its value is None, and a failed put is neither a "
            "miss nor an eviction"
        )


def evict_counts(script: Callable[[Any, int], Any], impl: Any) -> None:
    if not callable(getattr(impl, "_evict", None)):
        return  # a cache without the notebook's `_evict` counts wherever it evicts
    s = script(impl, 100)
    s.put("a", 40)
    s.put("b", 30)
    s("cache._evict('a')")
    got = stats_of(s.cache)
    want = (0, 0, 1, 40)
    if got != want:
        raise s.fail(
            f"after cache._evict('a'), (hits, misses, evictions, evicted_bytes) is {got}, "
            f"expected {want}: _evict counts the eviction and the bytes it frees, whatever "
            "calls it"
        )
