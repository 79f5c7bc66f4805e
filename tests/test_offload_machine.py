"""The offload hierarchy against an executable model: two LRU or FIFO tiers as ordered lists.

The model is the rule, written as plainly as possible: each tier is one list of resident keys,
oldest first (pinned and referenced keys keep their place); a hit moves a key to the end;
eviction takes the first keys that can_evict allows until the new chunks fit; what the first
tier evicts is written into the second unless it is there already; what the second evicts
leaves. Every observable fact (keys, order, pins, references, bytes, the summary) is compared
after every step, and after every error the whole state must be what it was before.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from servelab.kv.offload import (
    ChunkInUse,
    ChunkNotFound,
    ChunkNotPinned,
    ChunkNotReferenced,
    ChunkTooLarge,
    LookupClosed,
    OffloadHierarchy,
    Tier,
    disk_tier,
)
from servelab.kv.offload.disk import _HEADER as FRAME
from servelab.weights.policies import FIFO, LRU

KEYS = list(range(8))  # ints: the disk tier names them as 256-bit chunk names
SIZE = {k: 10 + 10 * (k % 4) for k in KEYS}  # 10..40 bytes: a chunk's size is fixed by its key
SIZE[7] = 500  # larger than any tier


def payload(k: int) -> bytes:
    return bytes([k]) * SIZE[k]


@dataclass
class ModelTier:
    cap: int
    overhead: int = 0  # a disk file's frame
    lru: bool = True
    order: list[int] = field(default_factory=list)
    pins: Counter[int] = field(default_factory=Counter)
    refs: Counter[int] = field(default_factory=Counter)

    def blocked(self, k: int) -> bool:
        return self.pins[k] > 0 or self.refs[k] > 0

    def size(self, k: int) -> int:
        return SIZE[k] + self.overhead

    def used(self) -> int:
        return sum(self.size(k) for k in self.order)

    def held(self) -> int:
        return sum(self.size(k) for k in self.order if self.blocked(k))

    def plan(self, adds: list[int], best_effort: bool) -> tuple[list[int], list[int]] | None:
        """(accepted adds, victims), or None when a required add does not fit."""
        room, total, accepted = self.cap - self.held(), 0, []
        for k in adds:
            if total + self.size(k) <= room:
                accepted.append(k)
                total += self.size(k)
            elif not best_effort:
                return None
        over, victims, freed = self.used() + total - self.cap, [], 0
        for k in self.order:
            if freed >= over:
                break
            if not self.blocked(k):
                victims.append(k)
                freed += self.size(k)
        return accepted, victims

    def commit(self, accepted: list[int], victims: list[int]) -> None:
        self.order = [k for k in self.order if k not in victims] + accepted

    def touch(self, k: int) -> None:
        if not self.lru:  # FIFO: arrival order only
            return
        self.order.remove(k)
        self.order.append(k)


class Model:
    def __init__(self, tiers: list[ModelTier], write_through: bool) -> None:
        self.tiers = tiers
        self.write_through = write_through

    def insert(self, adds: list[int], best_effort: bool) -> bool:
        top, low = self.tiers
        p0 = top.plan(adds, best_effort)
        if p0 is None:
            return False
        carry = (p0[0] if self.write_through else []) + p0[1]
        down = [k for k in carry if k not in low.order and low.size(k) <= low.cap]
        p1 = low.plan(down, True)
        assert p1 is not None
        top.commit(*p0)
        low.commit(*p1)
        return True

    def store(self, k: int) -> bool:
        if k in self.tiers[0].order:
            self.tiers[0].touch(k)
            return True
        return self.insert([k], best_effort=False)

    def lookup(self, keys: list[int]) -> list[tuple[int, int]]:
        found = []
        for k in keys:
            where = next((i for i, t in enumerate(self.tiers) if k in t.order), None)
            if where is None:
                break
            found.append((k, where))
        for k, i in found:
            self.tiers[i].pins[k] += 1
        return found

    def retrieve(self, found: list[tuple[int, int]]) -> None:
        top = self.tiers[0]
        ups: list[int] = []
        for k, i in found:
            if i > 0 and k not in ups and k not in top.order and top.size(k) <= top.cap:
                ups.append(k)
        if ups:
            self.insert(ups, best_effort=True)
        for k, i in found:
            self.tiers[i].touch(k)
            self.tiers[i].pins[k] -= 1


class OffloadMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.hierarchy: OffloadHierarchy | None = None
        self.model: Model | None = None
        self.lookups: list[tuple[Any, list[tuple[int, int]], bool]] = []
        self.tmp: str | None = None

    @precondition(lambda self: self.hierarchy is None)
    @rule(
        cap0=st.integers(40, 90),
        cap1=st.integers(40, 160),
        write_through=st.booleans(),
        lru=st.booleans(),
        on_disk=st.booleans(),
    )
    def build(self, cap0: int, cap1: int, write_through: bool, lru: bool, on_disk: bool) -> None:
        policy = LRU if lru else FIFO
        low: Tier[Any]
        if on_disk:  # real files: every demotion is an atomic write, every read verified
            self.tmp = tempfile.mkdtemp(prefix="offload-machine-")
            cap1 += 3 * FRAME
            low = disk_tier(self.tmp, cap1, policy())
        else:
            low = Tier(cap1, policy(), name="disk")
        tiers = [Tier(cap0, policy(), name="cpu"), low]
        self.hierarchy = OffloadHierarchy(tiers, write_through=write_through)
        models = [ModelTier(cap0, 0, lru), ModelTier(cap1, FRAME if on_disk else 0, lru)]
        self.model = Model(models, write_through)

    def teardown(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def built(self) -> bool:
        return self.hierarchy is not None

    def state(self) -> Any:
        h = self.hierarchy
        assert h is not None
        return [
            (t.keys(), t.eviction_order(), dict(t._pins), dict(t._refs), t.used, t.held_bytes)
            for t in h.tiers
        ] + [[lk.open for lk, _, _ in self.lookups]]

    @precondition(built)
    @rule(k=st.sampled_from(KEYS))
    def store(self, k: int) -> None:
        assert self.hierarchy is not None and self.model is not None
        if SIZE[k] > self.model.tiers[0].cap:
            before = self.state()
            with pytest.raises(ChunkTooLarge):
                self.hierarchy.store(k, payload(k))
            assert self.state() == before
            return
        got = self.hierarchy.store(k, payload(k))
        assert got.stored == self.model.store(k)

    @precondition(built)
    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
    def lookup(self, keys: list[int]) -> None:
        assert self.hierarchy is not None and self.model is not None
        lk = self.hierarchy.lookup(keys)
        found = self.model.lookup(keys)
        assert lk.found == found
        self.lookups.append((lk, found, True))

    def open_lookups(self) -> list[int]:
        return [i for i, (_, _, is_open) in enumerate(self.lookups) if is_open]

    @precondition(lambda self: self.open_lookups())
    @rule(data=st.data(), finish=st.booleans())
    def retrieve_or_release(self, data: st.DataObject, finish: bool) -> None:
        assert self.hierarchy is not None and self.model is not None
        i = data.draw(st.sampled_from(self.open_lookups()))
        lk, found, _ = self.lookups[i]
        if finish:
            got = self.hierarchy.retrieve(lk)
            assert got == [payload(k) for k, _ in found]
            self.model.retrieve(found)
        else:
            self.hierarchy.release(lk)
            for k, t in found:
                self.model.tiers[t].pins[k] -= 1
        self.lookups[i] = (lk, found, False)
        before = self.state()
        with pytest.raises(LookupClosed):
            self.hierarchy.release(lk)
        assert self.state() == before

    @precondition(built)
    @rule(t=st.integers(0, 1), k=st.sampled_from(KEYS), op=st.sampled_from(["ref", "unref"]))
    def transfer(self, t: int, k: int, op: str) -> None:
        assert self.hierarchy is not None and self.model is not None
        tier, mt = self.hierarchy.tiers[t], self.model.tiers[t]
        before = self.state()
        if k not in mt.order:
            with pytest.raises(ChunkNotFound):
                getattr(tier, op)(k)
        elif op == "ref":
            assert tier.ref(k) == mt.refs[k] + 2
            mt.refs[k] += 1
            return
        elif mt.refs[k] == 0:
            with pytest.raises(ChunkNotReferenced):
                tier.unref(k)
        else:
            tier.unref(k)
            mt.refs[k] -= 1
            return
        assert self.state() == before

    @precondition(built)
    @rule(t=st.integers(0, 1), k=st.sampled_from(KEYS))
    def remove_or_unpin(self, t: int, k: int) -> None:
        assert self.hierarchy is not None and self.model is not None
        tier, mt = self.hierarchy.tiers[t], self.model.tiers[t]
        before = self.state()
        if k not in mt.order:
            with pytest.raises(ChunkNotFound):
                tier.remove(k)
        elif mt.blocked(k):
            with pytest.raises(ChunkInUse):
                tier.remove(k)
            if mt.pins[k] == 0:
                with pytest.raises(ChunkNotPinned):
                    tier.unpin(k)
        else:
            tier.remove(k)
            mt.order.remove(k)
            return
        assert self.state() == before

    @invariant()
    def agrees_with_the_model(self) -> None:
        if self.hierarchy is None or self.model is None:
            return
        for tier, mt in zip(self.hierarchy.tiers, self.model.tiers, strict=True):
            assert sorted(tier.keys()) == sorted(mt.order)
            assert tier.eviction_order() == [k for k in mt.order if not mt.blocked(k)]
            assert tier.used == mt.used() <= tier.capacity
            assert tier.held_bytes == mt.held()
            for k in mt.order:
                assert tier.pin_count(k) == mt.pins[k]
                assert tier.ref_count(k) == mt.refs[k] + 1
                assert tier.can_evict(k) == (not mt.blocked(k))
        summary = self.hierarchy.summary()
        copies = [k for mt in self.model.tiers for k in mt.order]
        assert summary.total_bytes == sum(mt.used() for mt in self.model.tiers)
        largest = {k: max(mt.size(k) for mt in self.model.tiers if k in mt.order) for k in copies}
        assert summary.unique_bytes == sum(largest.values())
        assert summary.unique_chunks == len(set(copies))


OffloadMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestOffloadHierarchy = OffloadMachine.TestCase
