"""Cross-check: our byte-budget FIFO and LRU give libcachesim's hits and misses, request by request.

The trace is fair to both: every model keeps one size (libcachesim keeps the size an object
was inserted with) and every model fits in the cache (libcachesim skips an object larger than
the cache, where our node raises). Within those rules both are must-admit caches that evict
until the new model fits, so the two must agree exactly.
"""

from __future__ import annotations

import pytest

from servelab.weights.cache import WeightCache
from servelab.weights.policies import FIFO, LRU, SIEVE
from servelab.weights.sim import GB, PolicyNode, model_catalogue, replay, zipf_trace

lcs = pytest.importorskip("libcachesim")

MODELS = model_catalogue(40, seed=11)
TRACE = zipf_trace(MODELS, 6000, alpha=0.9, seed=11)
CAPACITY = 350 * GB


def _libcachesim_hits(algorithm: str) -> list[bool]:
    cache = getattr(lcs, algorithm)(cache_size=CAPACITY)
    ids: dict[str, int] = {}
    request = lcs.Request()
    out = []
    for model in TRACE:
        request.obj_id = ids.setdefault(model.name, len(ids) + 1)
        request.obj_size = model.size
        out.append(bool(cache.get(request)))
    return out


def _weight_cache_hits(policy: object) -> list[bool]:
    cache: WeightCache[str] = WeightCache(CAPACITY, policy=policy)  # type: ignore[arg-type]
    out = []
    for model in TRACE:
        hit = cache.get(model.name) is not None
        if not hit:
            cache.put(model.name, model.name, model.size)
        out.append(hit)
    return out


def test_the_trace_is_fair() -> None:
    assert max(m.size for m in MODELS) <= CAPACITY
    assert len({m.name for m in MODELS}) == len(MODELS)  # one size per model


@pytest.mark.parametrize(("ours", "theirs"), [(FIFO, "FIFO"), (LRU, "LRU"), (SIEVE, "Sieve")])
def test_same_hits_and_misses_as_libcachesim(ours: type, theirs: str) -> None:
    expected = _libcachesim_hits(theirs)
    assert 0.2 < sum(expected) / len(expected) < 0.9  # a trace that evicts, and hits
    assert _weight_cache_hits(ours()) == expected
    node = replay(TRACE, PolicyNode(CAPACITY, ours()))
    assert node.hits == sum(expected)


def test_replay_libcachesim_matches_our_replay_for_lru() -> None:
    from servelab.weights.sim import replay_libcachesim

    theirs = replay_libcachesim(TRACE, CAPACITY, "LRU")
    ours = replay(TRACE, PolicyNode(CAPACITY, LRU()))
    assert (theirs.hits, theirs.bytes_missed) == (ours.hits, ours.bytes_missed)


def test_replay_libcachesim_refuses_an_unfair_trace() -> None:
    from servelab.weights.sim import replay_libcachesim

    with pytest.raises(ValueError, match="larger than the cache"):
        replay_libcachesim(TRACE, 50 * GB, "LRU")
    with pytest.raises(ValueError, match="no algorithm"):
        replay_libcachesim(TRACE, CAPACITY, "NoSuchPolicy")
