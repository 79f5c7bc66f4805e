"""Every eviction policy agrees with its executable model, pins included."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from servelab.testing.core import thoroughness
from servelab.testing.policies import MODELS, policy_machine
from servelab.weights.cache import PinnedCapacityExceeded, WeightCache
from servelab.weights.policies import (
    FIFO,
    GDSF,
    LFU,
    LRU,
    MRU,
    POLICIES,
    S3FIFO,
    SIEVE,
    EvictionPolicy,
    NoVictim,
)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_matches_its_model(name: str) -> None:
    machine = policy_machine(POLICIES[name], MODELS[name], constructor=f"{name}()")
    machine.call_timeout = 60.0  # generous: a loaded CI box must never look hung
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=60 * thoroughness(), stateful_step_count=40, deadline=None),
    )


class _ThroughHooks:
    """Drives a policy the way WeightCache does: hits and puts go through its hooks."""

    def __init__(self, policy: EvictionPolicy[str]) -> None:
        self.policy = policy
        self.touch = policy.hit_hook()
        self.admit = policy.put_hook()

    def update_on_hit(self, key: str) -> None:
        if self.touch is not None:
            try:
                self.touch(key)
            except KeyError:
                self.policy.update_on_hit(key)

    def update_on_put(self, key: str, size: int) -> None:
        self.admit(key, size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def __len__(self) -> int:
        return len(self.policy)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_hooks_have_exactly_the_effect_of_the_updates(name: str) -> None:
    machine = policy_machine(
        lambda: _ThroughHooks(POLICIES[name]()), MODELS[name], constructor=f"{name}()"
    )
    machine.call_timeout = 60.0  # generous: a loaded CI box must never look hung
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=30 * thoroughness(), stateful_step_count=40, deadline=None),
    )


def test_lru_hit_hook_is_a_c_method_that_refuses_parked_keys() -> None:
    lru: LRU[str] = LRU()
    _fill(lru, "abc")
    lru.update_on_pin("a")
    assert lru.pop_victim() == "b"  # parks "a" on the way
    touch = lru.hit_hook()
    assert touch is not None and not hasattr(touch, "__code__")  # no Python frame per hit
    with pytest.raises(KeyError):
        touch("a")
    lru.update_on_hit("a")  # the fallback the cache calls: back at the newest end
    lru.update_on_unpin("a")
    assert lru.eviction_order() == ["c", "a"]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_pop_victim_raises_no_victim_when_all_pinned(name: str) -> None:
    policy = POLICIES[name]()
    policy.update_on_put("a", 1)
    policy.update_on_pin("a")
    with pytest.raises(NoVictim):
        policy.pop_victim()
    assert len(policy) == 0
    policy.update_on_unpin("a")
    assert policy.pop_victim() == "a"


def _fill(policy: object, keys: str, size: int = 1) -> None:
    for key in keys:
        policy.update_on_put(key, size)  # type: ignore[attr-defined]


def test_fifo_ignores_hits() -> None:
    p: FIFO[str] = FIFO()
    _fill(p, "abc")
    p.update_on_hit("a")
    assert p.eviction_order() == ["a", "b", "c"]


def test_mru_evicts_the_newest_use() -> None:
    p: MRU[str] = MRU()
    _fill(p, "abc")
    p.update_on_hit("a")
    assert p.pop_victim() == "a"
    assert p.eviction_order() == ["c", "b"]


def test_lfu_ties_leave_in_the_order_they_reached_the_count() -> None:
    p: LFU[str] = LFU()
    _fill(p, "abcd")
    for key in "dbca":  # every key reaches count 2, in this order
        p.update_on_hit(key)
    p.update_on_hit("d")  # d reaches 3
    assert p.eviction_order() == ["b", "c", "a", "d"]


def test_lfu_unpinned_key_returns_to_its_place_among_equals() -> None:
    p: LFU[str] = LFU()
    _fill(p, "abc")
    p.update_on_pin("a")
    p.update_on_hit("b")
    p.update_on_hit("c")
    p.update_on_unpin("a")  # count 1, older than nothing else of count 1
    assert p.eviction_order() == ["a", "b", "c"]


def test_sieve_sweeps_clears_bits_and_wraps() -> None:
    p: SIEVE[str] = SIEVE()
    _fill(p, "abcd")
    for key in "abd":
        p.update_on_hit(key)
    assert p.pop_victim() == "c"  # a, b cleared; c unvisited
    assert p.visited("d")
    assert p.pop_victim() == "a"  # d visited: cleared; past the newest the hand wraps to a
    assert not p.visited("d")
    assert p.eviction_order() == ["b", "d"]


def test_sieve_hand_wraps_to_the_oldest() -> None:
    p: SIEVE[str] = SIEVE()
    _fill(p, "abc")
    p.update_on_hit("a")
    p.update_on_hit("b")
    assert p.pop_victim() == "c"  # newest evicted: the hand must wrap next time
    p.update_on_put("d", 1)
    assert p.pop_victim() == "a"  # a and b lost their bits in the first sweep


def test_s3fifo_keeps_a_reused_newcomer_and_drops_a_one_hit_wonder() -> None:
    p: S3FIFO[str] = S3FIFO(small_ratio=0.5)
    _fill(p, "abcd")
    p.update_on_hit("a")
    assert p.pop_victim() == "b"  # a was reused in the small queue: promoted, b evicted
    p.update_on_put("b", 1)  # b is a ghost: it goes straight to the main queue
    assert "b" in p.eviction_order()


def test_gdsf_prefers_to_evict_large_rarely_used_models() -> None:
    p: GDSF[str] = GDSF()
    p.update_on_put("small", 14)
    p.update_on_put("large", 140)
    assert p.pop_victim() == "large"
    sized: GDSF[str] = GDSF(cost=float)  # cost ∝ size: plain LFU with aging
    sized.update_on_put("small", 14)
    sized.update_on_put("large", 140)
    sized.update_on_hit("large")
    assert sized.pop_victim() == "small"


def test_s3fifo_rejects_a_bad_ratio() -> None:
    with pytest.raises(ValueError, match="small_ratio"):
        S3FIFO(small_ratio=1.5)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_weight_cache_runs_any_policy_and_never_evicts_pinned(name: str) -> None:
    cache: WeightCache[str] = WeightCache(100, policy=POLICIES[name]())
    for i in range(5):
        cache.put(f"m{i}", i, 20)
    cache.pin("m0")
    cache.get("m3")
    for i in range(5, 12):
        evicted = cache.put(f"m{i}", i, 30)
        assert "m0" not in evicted
        assert cache.used <= 100
    assert "m0" in cache
    before = (cache.used, cache.eviction_order())
    with pytest.raises(PinnedCapacityExceeded):
        cache.put("big", None, 90)
    assert (cache.used, cache.eviction_order()) == before


MINE = sorted(set(POLICIES) - {"LRU"})


@pytest.mark.parametrize("name", MINE)
def test_contract_breaks_raise_before_any_change(name: str) -> None:
    policy = POLICIES[name]()
    _fill(policy, "ab")
    before = policy.eviction_order()
    with pytest.raises(ValueError, match="already resident"):
        policy.update_on_put("a", 1)
    with pytest.raises(KeyError, match="no such key"):
        policy.update_on_hit("zz")
    assert policy.eviction_order() == before and len(policy) == 2


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("pinned", ["", "a", "ab", "ac"])
def test_pop_victims_pops_what_pop_victim_would(name: str, pinned: str) -> None:
    """One pop_victims call chooses the keys, in the order, that pop_victim calls would, and
    restore_victims takes them back exactly (the undo log covers the one-frame fast path)."""
    sizes = {"a": 3, "b": 1, "c": 2, "d": 4, "e": 1}

    def fresh() -> EvictionPolicy[str]:
        policy: EvictionPolicy[str] = POLICIES[name]()
        for key, size in sizes.items():
            policy.update_on_put(key, size)
        for key in pinned:
            policy.update_on_pin(key)
        return policy

    for over in (1, 3, 5, 6):
        one_by_one, many = fresh(), fresh()
        expected: list[str] = []
        freed = 0
        while freed < over:
            expected.append(one_by_one.pop_victim())
            freed += sizes[expected[-1]]
        before = many.eviction_order()
        log = many.undo_log()
        if log is not None:
            log.clear()
        victims: list[str] = []
        assert many.pop_victims(over, sizes, victims) == freed
        assert victims == expected
        assert many.eviction_order() == one_by_one.eviction_order()
        many.restore_victims([(k, sizes[k]) for k in victims])
        assert many.eviction_order() == before


def test_pop_victims_of_a_subclass_goes_through_its_pop_victim() -> None:
    class Counting(LRU[str]):
        pops = 0

        def pop_victim(self) -> str:
            self.pops += 1
            return super().pop_victim()

    policy = Counting()
    _fill(policy, "abc")
    victims: list[str] = []
    assert policy.pop_victims(2, dict.fromkeys("abc", 1), victims) == 2
    assert victims == ["a", "b"] and policy.pops == 2


def test_pop_victims_stops_at_a_key_the_cache_does_not_hold() -> None:
    lru: LRU[str] = LRU()
    _fill(lru, "abc")
    victims: list[str] = []
    assert lru.pop_victims(3, {"a": 1, "c": 1}, victims) == 1  # "b" absent: the cache rejects
    assert victims == ["a", "b"]
    lru.restore_victims([])
    assert lru.eviction_order() == ["a", "b", "c"]


def test_pop_victims_raises_no_victim_and_pops_nothing_when_the_queue_runs_out() -> None:
    lru: LRU[str] = LRU()
    _fill(lru, "ab")
    with pytest.raises(NoVictim):
        lru.pop_victims(5, {"a": 1, "b": 1}, [])
    assert lru.eviction_order() == ["a", "b"] and len(lru) == 2


def test_every_rule_the_policy_machine_breaks_is_in_its_registry() -> None:
    """The ids a policy machine can raise are the keys of ``INVARIANTS`` (the graders read
    their report lines from it), read from the machine's source so a new rule cannot skip it."""
    import ast
    import inspect

    from servelab.testing import policies

    tree = ast.parse(inspect.getsource(policies))
    raised = {
        call.args[0].value
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and getattr(call.func, "attr", getattr(call.func, "id", ""))
        in ("_broke", "InvariantViolation")
        and call.args
        and isinstance(call.args[0], ast.Constant)
    }
    fields = {f"{field}-matches-model" for field in ("queue", *policies.SIEVE_FIELDS)}
    assert raised, "the machine's rules were found"
    assert raised | fields <= set(policies.INVARIANTS)
