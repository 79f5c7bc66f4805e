"""Targeted tests of the offload tiers: each realistic mistake the tiers must not make."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from servelab.kv.offload import (
    ChunkInUse,
    ChunkNotPinned,
    ChunkTooLarge,
    InvalidChunkKey,
    InvalidPayload,
    InvalidTierConfig,
    LookupClosed,
    OffloadHierarchy,
    OffloadPolicyInconsistent,
    Tier,
    TierInUse,
    TierIOError,
    Wait,
    chunk_keys,
    disk_tier,
)
from servelab.kv.offload import disk as disk_module
from servelab.weights.policies import FIFO, LFU, LRU, MRU, POLICIES, S3FIFO, SIEVE


def two_tiers(tmp_path: Path, cpu: int = 100, disk: int = 400, **kw: Any) -> OffloadHierarchy:
    return OffloadHierarchy([Tier(cpu, name="cpu"), disk_tier(tmp_path, disk)], **kw)


def keys(n: int) -> list[int]:
    return chunk_keys(list(range(4 * n)), chunk_tokens=4)


def test_chunk_keys_are_prefix_names_of_full_chunks() -> None:
    a = chunk_keys(list(range(600)))  # 256 tokens a chunk by default: two full chunks
    assert len(a) == 2
    assert chunk_keys([*range(512), 7]) == a  # the partial tail has no key
    assert chunk_keys([1, *range(1, 600)])[1] != a[1]  # a different prefix, a different name
    assert chunk_keys(list(range(600)), extra_key=b"other-model") != a
    with pytest.raises(InvalidChunkKey):
        chunk_keys([1, -2])
    with pytest.raises(InvalidTierConfig):
        chunk_keys([1], chunk_tokens=0)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_serves_a_tier_and_never_evicts_a_pinned_chunk(name: str) -> None:
    """Mistake: evicting a chunk a lookup pinned. Any policy of weights.policies will do."""
    tier: Tier[int] = Tier(100, POLICIES[name](), name="cpu")
    h = OffloadHierarchy([tier])
    h.store(0, b"x" * 30)
    lk = h.lookup([0])
    for k in range(1, 40):
        assert h.store(k, bytes([k]) * 30).stored
        assert 0 in tier and tier.used <= 100
    assert h.retrieve(lk) == [b"x" * 30]


def test_a_chunk_a_transfer_references_is_neither_evicted_nor_freed() -> None:
    """Mistake: freeing a chunk still referenced by a GPU transfer (ref_count > 1)."""
    tier: Tier[int] = Tier(60, LRU(), name="cpu")
    tier.put(1, b"a" * 30)
    with tier.held(1) as data:
        assert tier.ref_count(1) == 2 and not tier.can_evict(1)
        with pytest.raises(ChunkInUse):
            tier.remove(1)
        for k in range(2, 10):
            assert tier.put(k, b"b" * 30).stored
        assert 1 in tier and data == b"a" * 30
    assert tier.ref_count(1) == 1 and tier.can_evict(1)
    tier.put(99, b"c" * 30)
    assert 1 not in tier  # evictable again once the transfer is done


def test_retrieve_holds_its_pins_while_promotions_and_other_stores_churn(tmp_path: Path) -> None:
    """Mistake: promoting without pinning, so a chunk is evicted mid-retrieve."""
    h = two_tiers(tmp_path, cpu=60, disk=4 * (30 + 81))
    ks = keys(6)
    for k in ks:
        h.store(k, bytes([k % 251]) * 30)
    on_disk = [k for k in ks if h.where(k) == ["disk"]]
    assert on_disk
    lk = h.lookup(ks)
    assert lk.hits == len(ks)
    for k in keys(12)[6:]:  # another request's chunks push through both tiers
        h.store(k, b"z" * 30)
    assert all(h.where(k) for k in ks)  # pinned copies survived
    got = h.retrieve(lk)
    assert got == [bytes([k % 251]) * 30 for k in ks]
    assert all(h.tiers[i].pin_count(k) == 0 for k, i in lk.found)


def test_double_release_and_unpin_below_zero_raise_and_change_nothing(tmp_path: Path) -> None:
    """LMCache #3381: a double unpin drove the pin count negative."""
    h = two_tiers(tmp_path)
    k = keys(1)[0]
    h.store(k, b"q" * 20)
    lk = h.lookup([k])
    h.release(lk)
    with pytest.raises(LookupClosed):
        h.release(lk)
    with pytest.raises(LookupClosed):
        h.retrieve(lk)
    with pytest.raises(ChunkNotPinned):
        h.tiers[0].unpin(k)
    assert h.tiers[0].pin_count(k) == 0 and h.tiers[0].can_evict(k)


def test_all_pinned_is_a_miss_and_a_bounded_wait_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mistake: the busy loop that never ends when everything is pinned."""
    tier: Tier[int] = Tier(60, name="cpu")
    h = OffloadHierarchy([tier])
    h.store(1, b"a" * 30)
    h.store(2, b"b" * 30)
    lk = h.lookup([1, 2])
    before = (tier.keys(), tier.used, tier.held_bytes)
    assert h.store(3, b"c" * 30) == type(h.store(3, b"c" * 30))(False)  # a miss at once
    sleeps: list[float] = []
    monkeypatch.setattr("servelab.kv.offload.tier.time.sleep", sleeps.append)
    got = h.store(3, b"c" * 30, wait=Wait(attempts=5, interval_s=0.25))
    assert not got.stored and got.waited == 5 and sleeps == [0.25] * 5
    assert (tier.keys(), tier.used, tier.held_bytes) == before
    assert tier.stats.full_misses == 3
    h.release(lk)


def test_an_oversized_chunk_raises_at_once_even_with_a_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_sleep(_: float) -> None:
        raise AssertionError("an oversized chunk must not wait")

    monkeypatch.setattr("servelab.kv.offload.tier.time.sleep", no_sleep)
    tier: Tier[int] = Tier(60, name="cpu")
    h = OffloadHierarchy([tier], wait=Wait(attempts=10**9, interval_s=1))
    with pytest.raises(ChunkTooLarge):
        h.store(1, b"a" * 61)
    with pytest.raises(ChunkTooLarge):
        tier.put(1, b"a" * 61, wait=Wait(attempts=10**9))
    assert len(tier) == 0


def test_a_wait_succeeds_when_another_thread_releases() -> None:
    tier: Tier[int] = Tier(30, name="cpu")
    h = OffloadHierarchy([tier])
    h.store(1, b"a" * 30)
    lk = h.lookup([1])
    got: list[Any] = []
    waiter = threading.Thread(
        target=lambda: got.append(h.store(2, b"b" * 30, wait=Wait(attempts=2000, interval_s=0.005)))
    )
    waiter.start()
    h.release(lk)
    waiter.join()
    assert got[0].stored and 2 in tier and 1 not in tier


def test_a_wait_needs_a_bound() -> None:
    with pytest.raises(InvalidTierConfig):
        Wait()
    with pytest.raises(InvalidTierConfig):
        Wait(attempts=-1)
    with pytest.raises(InvalidTierConfig):
        Wait(timeout_s=float("nan"))
    assert list(Wait(timeout_s=0, interval_s=0).retries()) == []


def test_bytes_of_a_chunk_in_two_tiers_are_counted_once_per_tier(tmp_path: Path) -> None:
    """Mistake: double-counting bytes when a chunk lives in two tiers."""
    h = two_tiers(tmp_path, write_through=True)
    k = keys(1)[0]
    h.store(k, b"w" * 40)
    assert h.where(k) == ["cpu", "disk"]
    cpu, disk = h.tiers
    s = h.summary()
    assert cpu.used == 40 and disk.used == disk.size_of(k) > 40  # each its own copy
    assert s.total_bytes == cpu.used + disk.used
    assert s.unique_chunks == 1 and s.unique_bytes == disk.used
    assert s.duplicate_bytes == 40
    assert "each tier counts its own" in str(s)


def test_write_back_demotes_victims_and_drops_only_from_the_last_tier(tmp_path: Path) -> None:
    h = two_tiers(tmp_path, cpu=60, disk=2 * (40 + 81))
    ks = keys(5)
    results = [h.store(k, b"v" * 40) for k in ks]
    assert results[1].demoted == (("disk", ks[0]),)
    assert [h.where(k) for k in ks] == [[], [], ["disk"], ["disk"], ["cpu"]]
    assert set(results[3].dropped) == {ks[0]}


def test_a_victim_larger_than_the_tier_below_is_dropped_as_the_course_reference_does(
    tmp_path: Path,
) -> None:
    """The library and the notebook's reference agree: a store whose victim cannot fit the
    whole tier below succeeds, drops that victim and still writes the next one down."""
    from servelab import checkpoint

    h = OffloadHierarchy([Tier(60, name="cpu"), Tier(40, name="disk")])
    h.store("a", b"a" * 50)
    h.store("b", b"b" * 10)
    got = h.store("c", b"c" * 60)
    assert got.stored and got.dropped == ("a",) and got.demoted == (("disk", "b"),)
    assert [h.where(k) for k in "abc"] == [[], ["disk"], ["cpu"]]
    ref = checkpoint("kv-offload", 3)["Hierarchy"](60, 40, root=tmp_path / "ref")
    ref.store("a", b"a" * 50)
    ref.store("b", b"b" * 10)
    assert ref.store("c", b"c" * 60) is True
    assert [ref.where(k) for k in "abc"] == [[], ["disk"], ["cpu"]]
    assert sorted(p.name for p in (tmp_path / "ref").iterdir()) == ["b.chunk"]


def test_a_failed_disk_write_leaves_every_tier_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = two_tiers(tmp_path, cpu=60)
    ks = keys(3)
    h.store(ks[0], b"a" * 40)
    before = [(t.keys(), t.eviction_order(), t.used) for t in h.tiers]

    def full(*_: Any, **__: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(disk_module, "atomic_write", full)
    with pytest.raises(TierIOError) as err:
        h.store(ks[1], b"b" * 40)  # evicts ks[0] from the cpu, whose write-back fails
    assert err.value.errno == 28
    assert [(t.keys(), t.eviction_order(), t.used) for t in h.tiers] == before
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert h.store(ks[1], b"b" * 40).demoted == (("disk", ks[0]),)


class NamesPinned(LRU[int]):
    def pop_victims(self, over: int, sizes: Any, victims: list[int]) -> int:
        victims.append(1)  # pinned by the test
        return sizes[1]


def test_a_policy_that_names_a_pinned_victim_changes_nothing() -> None:
    tier: Tier[int] = Tier(60, NamesPinned(), name="cpu")
    h = OffloadHierarchy([tier])
    h.store(1, b"a" * 30)
    h.store(2, b"b" * 30)
    lk = h.lookup([1])
    with pytest.raises(OffloadPolicyInconsistent):
        h.store(3, b"c" * 30)
    assert tier.keys() == [1, 2] and tier.used == 60 and tier.eviction_order() == [2]
    h.release(lk)


def test_bad_input_is_typed_and_changes_nothing(tmp_path: Path) -> None:
    h = two_tiers(tmp_path)
    with pytest.raises(InvalidChunkKey):
        h.store("not-a-chunk-name", b"x")  # the disk tier names files by 256-bit keys
    with pytest.raises(InvalidChunkKey):
        h.lookup([[1]])
    with pytest.raises(InvalidPayload):
        h.store(5, "text")
    with pytest.raises(InvalidPayload):
        h.store(5, b"")
    with pytest.raises(InvalidTierConfig):
        Tier(0)
    with pytest.raises(TierInUse):
        OffloadHierarchy([h.tiers[0]])
    shared = LRU[int]()
    Tier(10, shared)
    with pytest.raises(TierInUse):
        Tier(10, shared)
    assert all(len(t) == 0 for t in h.tiers)


@pytest.mark.parametrize("policy", [FIFO, LFU, MRU, SIEVE, S3FIFO])
def test_hierarchy_runs_with_each_policy_in_each_tier(tmp_path: Path, policy: Any) -> None:
    h = OffloadHierarchy([Tier(90, policy(), name="cpu"), disk_tier(tmp_path, 600, policy())])
    ks = keys(12)
    for k in ks:
        h.store(k, bytes([k % 256]) * 30)
    for t in h.tiers:
        assert t.used == sum(t.size_of(k) for k in t.keys()) <= t.capacity
    lk = h.lookup(ks)
    assert h.retrieve(lk) == [bytes([k % 256]) * 30 for k in lk.keys]


def test_the_course_half_of_offload_imports_without_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, servelab.kv, servelab.kv.offload.disk, servelab.kv.offload.hierarchy; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class RefusesPuts(LRU[int]):
    refuse = False

    def update_on_put(self, key: int, size: int) -> None:
        if self.refuse:
            raise RuntimeError("policy refuses")
        super().update_on_put(key, size)

    def put_hook(self) -> Any:
        return self.update_on_put


@pytest.mark.parametrize("top", sorted(POLICIES))
def test_a_lower_tier_policy_that_raises_mid_cascade_changes_no_tier(top: str) -> None:
    low_policy = RefusesPuts()
    h = OffloadHierarchy(
        [Tier(60, POLICIES[top](), name="cpu"), Tier(200, low_policy, name="disk")]
    )
    for k in range(3):
        h.store(k, bytes([k]) * 30)  # 0 is demoted
    before = [(t.keys(), t.eviction_order(), t.used) for t in h.tiers]
    low_policy.refuse = True
    with pytest.raises(RuntimeError, match="policy refuses"):
        h.store(3, b"d" * 30)  # evicts a chunk from the cpu; its write-back is refused
    assert [(t.keys(), t.eviction_order(), t.used) for t in h.tiers] == before
    low_policy.refuse = False
    assert h.store(3, b"d" * 30).stored


def test_threads_storing_and_retrieving_keep_every_tier_consistent() -> None:
    h = OffloadHierarchy([Tier(200, name="cpu"), Tier(600, name="disk")])
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        import random

        rng = random.Random(seed)
        try:
            for _ in range(300):
                ks = [rng.randrange(40) for _ in range(rng.randint(1, 3))]
                lk = h.lookup(ks)
                if lk.hits and rng.random() < 0.7:
                    assert h.retrieve(lk) == [bytes([k]) * (10 + k) for k in lk.keys]
                else:
                    h.release(lk)
                    h.store(
                        ks[0], bytes([ks[0]]) * (10 + ks[0]), wait=Wait(attempts=3, interval_s=0)
                    )
        except BaseException as err:  # reported below, with its traceback
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    for t in h.tiers:
        assert t.used == sum(t.size_of(k) for k in t.keys()) <= t.capacity
        assert t.held_bytes == 0 and not t._pins and not t._refs
        assert sorted(t.eviction_order()) == sorted(t.keys())
