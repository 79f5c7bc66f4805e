"""The reference WeightCache: the seed's example, the errors, pins, stats, threads."""

from __future__ import annotations

import random
import sys
import threading

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from servelab.testing.core import thoroughness
from servelab.testing.weight_cache import WeightCacheModel, weight_cache_machine
from servelab.units import GB
from servelab.weights import (
    LRU,
    POLICIES,
    EntryPinned,
    EntryTooLarge,
    InvalidSize,
    NotPinned,
    NotResident,
    PinnedCapacityExceeded,
    WeightCache,
)


def state(cache: WeightCache[str]) -> tuple[object, ...]:
    return (cache.keys(), cache.used, cache.eviction_order(), cache.pinned_keys(), cache.stats)


def test_seed_example_300_gb() -> None:
    cache: WeightCache[str] = WeightCache(300 * GB)
    cache.put("llama-70b", "L", 140 * GB)
    cache.put("mixtral", "M", 90 * GB)
    assert cache.used == 230 * GB
    assert cache.get("llama-70b") == "L"  # mixtral is now the oldest
    assert cache.put("qwen-72b", "Q", 145 * GB) == ["mixtral"]
    assert cache.keys() == ["llama-70b", "qwen-72b"]
    assert cache.used == 285 * GB
    assert cache.stats.evictions == 1

    cache.pin("llama-70b")
    with pytest.raises(PinnedCapacityExceeded) as blocked:
        cache.put("big-200", "B", 200 * GB)
    assert isinstance(blocked.value, MemoryError) and not isinstance(blocked.value, ValueError)
    assert "llama-70b" in str(blocked.value) and "200 GB" in str(blocked.value)

    with pytest.raises(EntryTooLarge) as too_large:
        cache.put("big-400", "B", 400 * GB)
    assert isinstance(too_large.value, ValueError) and not isinstance(too_large.value, MemoryError)
    assert "400 GB" in str(too_large.value) and "300 GB" in str(too_large.value)
    assert cache.keys() == ["llama-70b", "qwen-72b"] and cache.used == 285 * GB


def test_errors_are_not_misses_and_change_nothing() -> None:
    cache: WeightCache[str] = WeightCache(100)
    for k in "abc":
        cache.put(k, k, 30)
    cache.pin("c")
    before = state(cache)
    bad_calls = [
        (PinnedCapacityExceeded, lambda: cache.put("x", "x", 80)),
        (EntryTooLarge, lambda: cache.put("x", "x", 101)),
        (InvalidSize, lambda: cache.put("x", "x", 0)),
        (InvalidSize, lambda: cache.put("x", "x", -3)),
        (InvalidSize, lambda: cache.put("x", "x", 1.5)),
        (InvalidSize, lambda: cache.put("x", "x", True)),
        (EntryPinned, lambda: cache.put("c", "c2", 10)),
        (EntryPinned, lambda: cache.remove("c")),
        (NotResident, lambda: cache.pin("zz")),
        (NotPinned, lambda: cache.unpin("zz")),
        (NotPinned, lambda: cache.unpin("a")),
    ]
    for error, call in bad_calls:
        with pytest.raises(error):
            call()
        assert state(cache) == before, error


def test_pins_are_counted_and_the_context_manager_releases() -> None:
    cache: WeightCache[str] = WeightCache(80)
    cache.put("a", "A", 40)
    cache.put("b", "B", 40)
    with cache.pinned("a") as weights:
        assert weights == "A"
        assert cache.pin("a") == 2  # a second replica
        assert cache.unpin("a") == 1
        assert cache.put("c", "C", 40) == ["b"]
    assert cache.pin_count("a") == 0
    assert cache.put("d", "D", 40) == ["a"]


def test_replacing_an_unpinned_key_releases_its_old_size() -> None:
    cache: WeightCache[str] = WeightCache(100)
    cache.put("a", 1, 60)
    cache.put("b", 2, 30)
    assert cache.put("a", 3, 70) == []  # 30 + 70 fits once a's 60 are released
    assert cache.keys() == ["b", "a"] and cache.used == 100
    assert cache.stats.evictions == 0


def test_unpinned_key_returns_to_its_recency_place() -> None:
    cache: WeightCache[str] = WeightCache(100)
    for k in "abcd":
        cache.put(k, k, 25)
    cache.pin("a")
    cache.get("b")
    cache.unpin("a")  # a is still the least recently used
    assert cache.eviction_order() == ["a", "c", "d", "b"]
    assert cache.put("e", "e", 50) == ["a", "c"]


def test_pinned_hit_refreshes_recency() -> None:
    cache: WeightCache[str] = WeightCache(100)
    for k in "abcd":
        cache.put(k, k, 25)
    cache.pin("a")
    cache.get("a")
    cache.unpin("a")
    assert cache.keys() == ["b", "c", "d", "a"]
    assert cache.eviction_order() == ["b", "c", "d", "a"]


def test_eviction_order_is_exact_under_many_pins() -> None:
    # Keeping pinned keys out of the candidate order must not change which key goes next.
    rng = random.Random(7)
    cache: WeightCache[int] = WeightCache(10_000)
    model = WeightCacheModel(10_000)
    for step in range(3_000):
        key = rng.randrange(60)
        op = rng.random()
        if op < 0.5 and not model.pins.get(key):
            size = rng.randrange(1, 900)
            if model.put_outcome(key, size) == "ok":  # type: ignore[arg-type]
                assert cache.put(key, key, size) == model.victims_for(key, size)  # type: ignore[arg-type]
                model.put(key, size)  # type: ignore[arg-type]
        elif op < 0.7:
            cache.get(key)
            model.get(key)  # type: ignore[arg-type]
        elif op < 0.85 and key in model.order:
            cache.pin(key)
            model.pins[key] = model.pins.get(key, 0) + 1  # type: ignore[index]
        elif model.pins.get(key):
            cache.unpin(key)
            model.pins[key] -= 1  # type: ignore[index]
        assert cache.keys() == list(model.order), step


def test_policy_must_start_empty() -> None:
    policy: LRU[str] = LRU()
    policy.update_on_put("x", 1)
    with pytest.raises(ValueError):
        WeightCache(10, policy)


@pytest.mark.parametrize("capacity", [0, -5, 2.5, "10"])
def test_capacity_must_be_positive_bytes(capacity: object) -> None:
    with pytest.raises(InvalidSize):
        WeightCache(capacity)  # type: ignore[arg-type]


def test_reference_passes_the_state_machine_at_every_level() -> None:
    for level in range(1, 6):
        machine = weight_cache_machine(WeightCache, level)
        machine.call_timeout = 60.0  # generous: a loaded CI box must never look hung
        run_state_machine_as_test(
            machine,
            settings=settings(max_examples=25 * thoroughness(), stateful_step_count=40),
        )


@pytest.mark.parametrize("policy", ["LRU", "LFU"])
def test_threads_pinning_and_putting_keep_the_invariants(policy: str) -> None:
    cache: WeightCache[str] = WeightCache(1_000, policy=POLICIES[policy]())
    keys = [f"m{i}" for i in range(12)]
    errors: list[BaseException] = []
    gets = [0] * 6
    barrier = threading.Barrier(6)

    def replica(i: int) -> None:
        rng = random.Random(i)
        barrier.wait()
        try:
            for _ in range(10_000):
                key = rng.choice(keys)
                r = rng.random()
                if r < 0.4:
                    try:
                        cache.put(key, key, rng.randrange(50, 400))
                    except (PinnedCapacityExceeded, EntryPinned):
                        pass
                elif r < 0.7:
                    cache.get(key)
                    gets[i] += 1
                else:
                    try:
                        with cache.pinned(key):
                            # pinned: no other thread may evict or replace it meanwhile
                            assert cache.get(key) == key, f"{key} left the cache while pinned"
                            gets[i] += 1
                    except NotResident:
                        pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, inside the lock too
    try:
        threads = [threading.Thread(target=replica, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    assert cache.used == sum(cache.size_of(k) for k in cache.keys()) <= cache.capacity
    assert cache.pinned_keys() == []
    assert sorted(cache.eviction_order()) == sorted(cache.keys())
    stats = cache.stats
    assert stats.hits + stats.misses == sum(gets)  # no count lost to a race
    assert stats.evictions > 0


def test_every_rule_the_weight_cache_machine_breaks_is_in_its_registry() -> None:
    """The ids the machine can raise are the keys of ``INVARIANTS``, and every hint of the
    grader answers one of them: read from the source, so a one-off id cannot slip in."""
    import ast
    import inspect

    from servelab.grading import weight_cache as grader
    from servelab.testing import weight_cache as machine

    raised: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(machine))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "InvariantViolation":
            first = node.args[0]
            if isinstance(first, ast.Constant):
                raised.add(first.value)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("inv", "rule"):
            values = [node.value] if isinstance(node.value, ast.Constant) else []
            if isinstance(node.value, ast.IfExp):
                values = [node.value.body, node.value.orelse]
            raised |= {v.value for v in values if isinstance(v, ast.Constant)}
    assert len(raised) > 10, raised
    assert raised <= set(machine.INVARIANTS)
    assert set(grader.HINTS) - {"exception"} <= set(machine.INVARIANTS)
