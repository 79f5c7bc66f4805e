"""The offload tiers' rules as a plain model: one tier, and a hierarchy of them.

A tier is an ordered dict of resident chunks (key -> bytes, next victim candidate first) with
pin and reference counts; the hierarchy stores into the first tier and cascades each tier's
victims into the next. The state machines of :mod:`servelab.testing.kv_offload` drive a
learner's classes beside these and compare.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["HierarchyModel", "TierModel"]


@dataclass
class TierModel:
    """One tier's rules."""

    capacity: int
    policy: str = "LRU"
    sizes: OrderedDict[str, int] = field(default_factory=OrderedDict)
    pins: dict[str, int] = field(default_factory=dict)
    refs: dict[str, int] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return sum(self.sizes.values())

    def can_evict(self, key: str) -> bool:
        return not self.pins.get(key) and not self.refs.get(key)

    def evictable_bytes(self) -> int:
        return sum(s for k, s in self.sizes.items() if self.can_evict(k))

    def victims(self, size: int) -> list[str] | None:
        need = size - (self.capacity - self.used)
        chosen: list[str] = []
        for k, s in self.sizes.items():
            if need <= 0:
                break
            if self.can_evict(k):
                chosen.append(k)
                need -= s
        return chosen if need <= 0 else None

    def touch(self, key: str) -> None:
        if self.policy == "LRU":
            self.sizes.move_to_end(key)

    def put(self, key: str, size: int) -> list[str] | None:
        if key in self.sizes:
            self.touch(key)
            return []
        victims = self.victims(size)
        if victims is None:
            return None
        for v in victims:
            del self.sizes[v]
        self.sizes[key] = size
        return victims


@dataclass
class HierarchyModel:
    """The hierarchy's rules over two model tiers."""

    tiers: list[TierModel]

    def cascade(self, start: int, chunks: list[str], sizes: dict[str, int]) -> None:
        for tier in self.tiers[start:]:
            below: list[str] = []
            for k in chunks:
                if k in tier.sizes:
                    continue
                evicted = tier.put(k, sizes[k])
                below += evicted or []
            chunks = below

    def store(self, key: str, size: int) -> bool:
        sizes = self.all_sizes()
        sizes[key] = size
        evicted = self.tiers[0].put(key, size)
        if evicted is None:
            return False
        self.cascade(1, evicted, sizes)
        return True

    def lookup(self, keys: list[str]) -> list[tuple[str, int]]:
        found = []
        for k in keys:
            where = next((i for i, t in enumerate(self.tiers) if k in t.sizes), None)
            if where is None:
                break
            t = self.tiers[where]
            t.pins[k] = t.pins.get(k, 0) + 1
            found.append((k, where))
        return found

    def retrieve(self, found: list[tuple[str, int]]) -> list[str]:
        sizes = self.all_sizes()
        for k, i in found:
            self.tiers[i].touch(k)
            self.tiers[i].refs[k] = self.tiers[i].refs.get(k, 0) + 1
        top = self.tiers[0]
        for k, i in found:
            if i > 0 and k not in top.sizes and sizes[k] <= top.capacity:
                evicted = top.put(k, sizes[k])
                if evicted:
                    self.cascade(1, evicted, sizes)
        for k, i in found:
            self.release_one(self.tiers[i].refs, k)
            self.release_one(self.tiers[i].pins, k)
        return [k for k, _ in found]

    def release(self, found: list[tuple[str, int]]) -> None:
        for k, i in found:
            self.release_one(self.tiers[i].pins, k)

    @staticmethod
    def release_one(counts: dict[str, int], key: str) -> None:
        counts[key] -= 1
        if not counts[key]:
            del counts[key]

    def all_sizes(self) -> dict[str, int]:
        return {k: s for t in self.tiers for k, s in t.sizes.items()}

    def held_bytes(self) -> int:
        return sum(self.all_sizes().values())
