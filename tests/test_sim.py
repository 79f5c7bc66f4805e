"""The simulator: traces, replay accounting, the offline limit, count vs bytes, fleets."""

from __future__ import annotations

from collections import Counter

import pytest

from servelab.weights.cache import WeightCache
from servelab.weights.policies import LRU, POLICIES
from servelab.weights.sim import (
    GB,
    Bandwidths,
    CountLimitedNode,
    Model,
    PolicyNode,
    belady,
    fleet,
    model_catalogue,
    replay,
    simulate_fleet,
    zipf_trace,
)

MODELS = model_catalogue(30, seed=3)
TRACE = zipf_trace(MODELS, 4000, alpha=0.9, seed=3)


def test_traces_are_seeded_and_skewed() -> None:
    assert zipf_trace(MODELS, 500, seed=1) == zipf_trace(MODELS, 500, seed=1)
    assert zipf_trace(MODELS, 500, seed=1) != zipf_trace(MODELS, 500, seed=2)
    counts = Counter(m.name for m in TRACE).most_common()
    assert counts[0][1] > 5 * counts[-1][1]
    sizes = {m.size for m in MODELS}
    assert min(sizes) >= 1 * GB and max(sizes) <= 140 * GB and len(sizes) > 3


def test_uniform_popularity_with_alpha_zero() -> None:
    trace = zipf_trace(MODELS[:4], 8000, alpha=0.0, seed=0)
    counts = Counter(m.name for m in trace)
    assert all(1700 < c < 2300 for c in counts.values())


def test_replay_accounts_every_request_and_byte() -> None:
    node = PolicyNode(300 * GB, LRU())
    result = replay(TRACE, node, bandwidths=Bandwidths(nvme=2 * GB))
    assert result.requests == len(TRACE)
    assert result.bytes_requested == sum(m.size for m in TRACE)
    assert 0 < result.hits < result.requests
    assert 0 < result.bytes_missed < result.bytes_requested
    assert result.cold_start_s_nvme == pytest.approx(result.bytes_missed / (2 * GB))
    assert result.cold_start_s_object_storage == pytest.approx(result.bytes_missed / GB)
    assert result.peak_resident_bytes <= 300 * GB
    assert result.misses >= len({m.name for m in TRACE})  # every model misses once at least
    assert result.evictions == result.misses - len(node)  # each miss loads, each eviction drops


def test_distinct_requests_all_miss() -> None:
    trace = list(MODELS)
    result = replay(trace, PolicyNode(1000 * GB, LRU()))
    assert result.object_miss_ratio == 1.0 and result.byte_miss_ratio == 1.0


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_node_replays_exactly_like_the_weight_cache(name: str) -> None:
    node = PolicyNode(250 * GB, POLICIES[name]())
    cache: WeightCache[str] = WeightCache(250 * GB, policy=POLICIES[name]())
    for model in TRACE[:1500]:
        hit_cache = cache.get(model.name) is not None
        if not hit_cache:
            cache.put(model.name, model.name, model.size)
        assert node.access(model.name, model.size) == hit_cache
    assert node.resident_bytes == cache.used


def test_node_rejects_a_model_larger_than_the_node() -> None:
    node = PolicyNode(100 * GB, LRU())
    node.access("small", 10 * GB)
    with pytest.raises(ValueError, match="node holds"):
        node.access("llama-70b", 140 * GB)
    assert "small" in node and node.resident_bytes == 10 * GB


def test_belady_with_equal_sizes_never_loses_to_an_online_policy() -> None:
    equal = [Model(m.name, GB) for m in MODELS]
    trace = zipf_trace(equal, 3000, alpha=0.8, seed=5)
    best = belady(trace, 8 * GB, size_aware=False)
    assert belady(trace, 8 * GB, size_aware=True).misses == best.misses
    for name, make in POLICIES.items():
        assert best.misses <= replay(trace, PolicyNode(8 * GB, make())).misses, name


def test_belady_is_below_lru_on_the_weight_mix() -> None:
    lru = replay(TRACE, PolicyNode(300 * GB, LRU()))
    assert belady(TRACE, 300 * GB, size_aware=True).object_miss_ratio < lru.object_miss_ratio
    assert belady(TRACE, 300 * GB, size_aware=False).byte_miss_ratio < lru.byte_miss_ratio


def test_count_based_cache_overflows_or_collapses_with_a_70b_model() -> None:
    small = [Model(f"s{i}-14g", 14 * GB) for i in range(30)]
    big = Model("llama-70b", 140 * GB)
    trace = zipf_trace([*small, big], 4000, alpha=0.9, seed=7)
    budget = 300 * GB
    by_bytes = replay(trace, PolicyNode(budget, LRU()))
    sized_for_7b = replay(trace, CountLimitedNode(budget // (14 * GB), LRU()))
    sized_for_70b = replay(trace, CountLimitedNode(budget // (140 * GB), LRU()))
    assert by_bytes.peak_resident_bytes <= budget
    assert sized_for_7b.peak_resident_bytes > budget  # the disk would overflow
    assert sized_for_70b.peak_resident_bytes <= budget
    assert sized_for_70b.hit_ratio < by_bytes.hit_ratio / 2  # the collapse


def test_affinity_routing_beats_random_routing() -> None:
    random_fleet = simulate_fleet(TRACE, fleet(8, 200 * GB, LRU), router="random", seed=1)
    affinity = simulate_fleet(TRACE, fleet(8, 200 * GB, LRU), router="affinity", seed=1)
    assert random_fleet.requests == affinity.requests == len(TRACE)
    assert affinity.hit_ratio > random_fleet.hit_ratio + 0.2
    assert affinity.cold_start_s_nvme < random_fleet.cold_start_s_nvme


def test_one_node_fleet_is_a_plain_replay() -> None:
    alone = simulate_fleet(TRACE, fleet(1, 300 * GB, LRU), router="random")
    assert alone.hits == replay(TRACE, PolicyNode(300 * GB, LRU())).hits


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: model_catalogue(0), "n_models"),
        (lambda: zipf_trace([], 3), "empty"),
        (lambda: zipf_trace(MODELS, 3, alpha=-1), "alpha"),
        (lambda: Model("x", 0), "positive"),
        (lambda: Bandwidths(nvme=0), "positive"),
        (lambda: PolicyNode(0, LRU()), "capacity"),
        (lambda: simulate_fleet(TRACE, [], router="random"), "at least one"),
        (lambda: simulate_fleet(TRACE, fleet(2, GB, LRU), router="nearest"), "router"),  # type: ignore[arg-type]
        (lambda: belady(TRACE, 10 * GB), "node holds"),
    ],
)
def test_bad_arguments_raise_value_error(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_progress_bar_is_optional_and_changes_nothing() -> None:
    quiet = replay(TRACE[:300], PolicyNode(200 * GB, LRU()), progress=False)
    shown = replay(TRACE[:300], PolicyNode(200 * GB, LRU()), progress=True)
    assert (quiet.hits, quiet.bytes_missed) == (shown.hits, shown.bytes_missed)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_node_keeps_only_the_last_evictions_undo_log(name: str) -> None:
    # A node never takes victims back, so it empties the log before each eviction, as the
    # cache does: a replay's memory does not grow with the length of its trace.
    policy = POLICIES[name]()
    node = PolicyNode(200 * GB, policy)
    result = replay(TRACE, node, progress=False)
    log = policy.undo_log()
    assert result.evictions > 100
    assert log is None or len(log) <= len(MODELS)
