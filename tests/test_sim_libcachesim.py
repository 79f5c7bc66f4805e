"""Cross-check: our byte-budget FIFO and LRU give libcachesim's hits and misses, request by request.

The trace is fair to both: every model keeps one size (libcachesim keeps the size an object
was inserted with) and every model fits in the cache (libcachesim skips an object larger than
the cache, where our node raises). Within those rules both are must-admit caches that evict
until the new model fits, so the two must agree exactly.
"""

from __future__ import annotations

import pytest

from servelab.weights.cache import WeightCache
from servelab.weights.policies import FIFO, GDSF, LRU, S3FIFO, SIEVE
from servelab.weights.sim import GB, Model, PolicyNode, model_catalogue, replay, zipf_trace

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


def test_libcachesim_s3fifo_never_admits_a_model_larger_than_its_small_queue() -> None:
    """Why its byte miss ratio is far above ours on the benchmark's trace: its S3FIFO refuses
    any object larger than the small queue (10% of the cache), so a model above 50 GB on a
    500 GB node misses on every request; a weight cache must admit every model it serves."""
    from servelab.weights.sim import replay_libcachesim

    big = Model("m-140g", 140 * GB)
    trace = [big] * 20
    theirs = replay_libcachesim(trace, 500 * GB, "S3FIFO")
    assert theirs.hits == 0
    assert replay_libcachesim(trace, 500 * GB, "LRU").hits == 19
    assert replay(trace, PolicyNode(500 * GB, S3FIFO())).hits == 19


def test_s3fifo_agrees_with_libcachesim_when_every_model_fits_its_small_queue() -> None:
    """With that admission rule out of play, the two S3-FIFOs agree closely. What remains:
    libcachesim gives the small and main queues fixed byte budgets and sizes its ghost queue
    in bytes (90% of the cache); ours sizes the small queue as a share of resident bytes and
    remembers as many ghost ids as there are resident models."""
    from servelab.weights.sim import replay_libcachesim

    models = model_catalogue(60, sizes_gb=(1, 2, 4, 8, 14, 16, 26, 48), seed=0)
    trace = zipf_trace(models, 20_000, alpha=0.9, seed=0)
    theirs = replay_libcachesim(trace, 500 * GB, "S3FIFO", move_to_main_threshold=1)
    ours = replay(trace, PolicyNode(500 * GB, S3FIFO()))
    assert abs(theirs.object_miss_ratio - ours.object_miss_ratio) < 0.01
    assert abs(theirs.byte_miss_ratio - ours.byte_miss_ratio) < 0.01
    lru = replay(trace, PolicyNode(500 * GB, LRU()))
    assert ours.object_miss_ratio < lru.object_miss_ratio - 0.01  # and both beat LRU


def _gdsf_new_model_competes(trace: list[Model], capacity: int) -> list[bool]:
    """Our GDSF policy driven the way libcachesim's GDSF behaves: the missed object is inserted
    first and then competes with the residents for eviction, so it may be its own victim (not
    admitted at all). A must-admit weight cache evicts among the residents only."""
    policy: GDSF[str] = GDSF()
    sizes: dict[str, int] = {}
    used = 0
    hits = []
    for model in trace:
        if model.name in sizes:
            policy.update_on_hit(model.name)
            hits.append(True)
            continue
        hits.append(False)
        policy.update_on_put(model.name, model.size)
        sizes[model.name] = model.size
        used += model.size
        while used > capacity:
            used -= sizes.pop(policy.pop_victim())
    return hits


def test_libcachesim_gdsf_lets_the_missed_model_compete_for_eviction() -> None:
    """Why its GDSF misses fewer objects than ours: the same priority (L + count/size, ties
    first in first out), but the missed model may lose to the residents and not be admitted."""
    from servelab.weights.sim import replay_libcachesim

    models = model_catalogue(60, seed=0)
    trace = zipf_trace(models, 20_000, alpha=0.9, seed=0)
    theirs = replay_libcachesim(trace, 500 * GB, "GDSF")
    competes = _gdsf_new_model_competes(trace, 500 * GB)
    ours = replay(trace, PolicyNode(500 * GB, GDSF()))
    assert abs(theirs.hits - sum(competes)) <= len(trace) // 500
    assert theirs.hits - ours.hits > len(trace) // 100  # the must-admit rule costs hits
