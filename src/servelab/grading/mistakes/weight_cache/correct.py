"""A correct learner-style weight cache: an OrderedDict scan, as the notebook builds it.

Every file beside this one subclasses it and plants exactly one known mistake.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class LearnerCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity = capacity_bytes
        self._items: OrderedDict[Any, tuple[int, Any]] = OrderedDict()
        self._pins: dict[Any, int] = {}
        self._used = 0
        self.hits = self.misses = self.evictions = self.evicted_bytes = 0

    # inspection (provided by the exercise skeleton)
    @property
    def used(self) -> int:
        return self._used

    def keys(self) -> list[Any]:
        return list(self._items)

    def pin_count(self, key: Any) -> int:
        return self._pins.get(key, 0)

    # the learner's work
    def get(self, key: Any) -> Any:
        if key not in self._items:
            self.misses += 1
            return None
        self.hits += 1
        self._items.move_to_end(key)
        return self._items[key][1]

    def _victim(self) -> Any:
        for k in self._items:
            if not self._pins.get(k):
                return k
        return None

    def _check_admissible(self, key: Any, size: int) -> None:
        if size <= 0:
            raise ValueError(f"size must be positive, got {size}")
        if size > self.capacity:
            raise ValueError(f"{key!r} is larger than the whole cache")
        if self._pins.get(key):
            raise RuntimeError(f"{key!r} is pinned; unpin it before replacing it")
        unpinned = sum(s for k, (s, _) in self._items.items() if not self._pins.get(k))
        if size > self.capacity - self._used + unpinned:
            pinned = [k for k in self._items if self._pins.get(k)]
            raise MemoryError(f"cannot fit {key!r}: pinned {pinned}")

    def _release_old(self, key: Any) -> None:
        if key in self._items:
            self._used -= self._items.pop(key)[0]

    def _evict_until_fits(self, size: int) -> None:
        while self._used + size > self.capacity:
            victim = self._victim()
            self._evict(victim)

    def _evict(self, victim: Any) -> None:
        size, _ = self._items.pop(victim)
        self._used -= size
        self.evictions += 1
        self.evicted_bytes += size

    def put(self, key: Any, value: Any, size: int) -> None:
        self._check_admissible(key, size)
        self._release_old(key)
        self._evict_until_fits(size)
        self._items[key] = (size, value)
        self._used += size

    def pin(self, key: Any) -> None:
        if key not in self._items:
            raise KeyError(key)
        self._pins[key] = self._pins.get(key, 0) + 1

    def unpin(self, key: Any) -> None:
        if not self._pins.get(key):
            raise ValueError(f"{key!r} is not pinned")
        self._pins[key] -= 1
