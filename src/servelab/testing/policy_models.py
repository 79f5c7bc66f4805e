"""Executable models of the eviction policies: each rule written as plainly as it goes.

Each model keeps every resident key in one plain list in arrival order, pinned keys included,
and finds a victim by scanning that list and skipping pinned keys: slow and obviously right.
:mod:`servelab.testing.policies` drives a policy beside its model and compares. The rules are
listed there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import ClassVar

__all__ = [
    "MODELS",
    "FIFOModel",
    "GDSFModel",
    "LFUModel",
    "LRUModel",
    "MRUModel",
    "PolicyModel",
    "S3FIFOModel",
    "SIEVEModel",
]

Key = Hashable


class PolicyModel:
    """Every resident key in arrival order, a set of pinned keys, a clock; victims by scan."""

    name: ClassVar[str] = "model"

    def __init__(self) -> None:
        self.keys: list[Key] = []
        self.pinned: set[Key] = set()
        self.size: dict[Key, int] = {}
        self.clock = 0

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def candidates(self) -> list[Key]:
        return [k for k in self.keys if k not in self.pinned]

    def put(self, key: Key, size: int) -> None:
        self.keys.append(key)
        self.size[key] = size

    def hit(self, key: Key) -> None:
        return None

    def forget(self, key: Key) -> None:
        self.keys.remove(key)
        self.pinned.discard(key)
        del self.size[key]

    def remove(self, key: Key) -> None:
        self.forget(key)

    def pin(self, key: Key) -> None:
        self.pinned.add(key)

    def unpin(self, key: Key) -> None:
        self.pinned.discard(key)

    def victim(self) -> Key | None:
        """The next victim, removed from the model; None when every key is pinned."""
        raise NotImplementedError

    def order(self) -> list[Key]:
        """The victims in the order repeated pops would give them (the model is unchanged)."""
        trial = self.clone()
        out = []
        while (key := trial.victim()) is not None:
            out.append(key)
        return out

    def clone(self) -> PolicyModel:
        twin = type(self).__new__(type(self))
        for attr, value in vars(self).items():
            setattr(twin, attr, value.copy() if hasattr(value, "copy") else value)
        return twin


class _ByRank(PolicyModel):
    """Victim = the candidate whose rank is smallest."""

    def rank(self, key: Key) -> tuple[float, ...]:
        raise NotImplementedError

    def victim(self) -> Key | None:
        candidates = self.candidates()
        if not candidates:
            return None
        key = min(candidates, key=self.rank)
        self.forget(key)
        return key


class FIFOModel(_ByRank):
    name = "FIFO"

    def rank(self, key: Key) -> tuple[float, ...]:
        return (self.keys.index(key),)


class LRUModel(_ByRank):
    name = "LRU"

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[Key, int] = {}

    def put(self, key: Key, size: int) -> None:
        super().put(key, size)
        self.last[key] = self.tick()

    def hit(self, key: Key) -> None:
        self.last[key] = self.tick()

    def forget(self, key: Key) -> None:
        super().forget(key)
        del self.last[key]

    def rank(self, key: Key) -> tuple[float, ...]:
        return (self.last[key],)


class MRUModel(LRUModel):
    name = "MRU"

    def rank(self, key: Key) -> tuple[float, ...]:
        return (-self.last[key],)


class LFUModel(LRUModel):
    """Count, then the time the count was reached: that is the last put-or-hit."""

    name = "LFU"

    def __init__(self) -> None:
        super().__init__()
        self.count: dict[Key, int] = {}

    def put(self, key: Key, size: int) -> None:
        super().put(key, size)
        self.count[key] = 1

    def hit(self, key: Key) -> None:
        super().hit(key)
        self.count[key] += 1

    def forget(self, key: Key) -> None:
        super().forget(key)
        del self.count[key]

    def rank(self, key: Key) -> tuple[float, ...]:
        return (self.count[key], self.last[key])


class GDSFModel(LFUModel):
    """Priority fixed when set (put or hit) from the current L; unit cost."""

    name = "GDSF"

    def __init__(self, cost: Callable[[int], float] = lambda size: 1.0) -> None:
        super().__init__()
        self.cost = cost
        self.inflation = 0.0
        self.priority: dict[Key, float] = {}

    def _set(self, key: Key) -> None:
        size = self.size[key]
        self.priority[key] = self.inflation + self.count[key] * self.cost(size) / size

    def put(self, key: Key, size: int) -> None:
        super().put(key, size)
        self._set(key)

    def hit(self, key: Key) -> None:
        super().hit(key)
        self._set(key)

    def forget(self, key: Key) -> None:
        super().forget(key)
        del self.priority[key]

    def rank(self, key: Key) -> tuple[float, ...]:
        return (self.priority[key], self.last[key])

    def victim(self) -> Key | None:
        candidates = self.candidates()
        if not candidates:
            return None
        key = min(candidates, key=self.rank)
        self.inflation = self.priority[key]
        self.forget(key)
        return key


class SIEVEModel(PolicyModel):
    """The textbook SIEVE on a list: the hand points at a key (None: start at the oldest)."""

    name = "SIEVE"

    def __init__(self) -> None:
        super().__init__()
        self.visited: dict[Key, bool] = {}
        self.hand: Key | None = None

    def put(self, key: Key, size: int) -> None:
        super().put(key, size)
        self.visited[key] = False

    def hit(self, key: Key) -> None:
        self.visited[key] = True

    def forget(self, key: Key) -> None:
        if key == self.hand:  # the hand moves on to the next newer key
            i = self.keys.index(key)
            self.hand = self.keys[i + 1] if i + 1 < len(self.keys) else None
        super().forget(key)
        del self.visited[key]

    def victim(self) -> Key | None:
        if not self.candidates():
            return None
        i = 0 if self.hand is None else self.keys.index(self.hand)
        while True:
            if i == len(self.keys):
                i = 0
            key = self.keys[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.hand = key
                self.forget(key)  # the hand moves on past it
                return key


class S3FIFOModel(PolicyModel):
    """Two plain lists (small, main) in entry order, pinned keys skipped; a ghost list."""

    name = "S3-FIFO"

    def __init__(self, small_ratio: float = 0.1) -> None:
        super().__init__()
        self.small_ratio = small_ratio
        self.small: list[Key] = []
        self.main: list[Key] = []
        self.freq: dict[Key, int] = {}
        self.ghost: list[Key] = []

    def put(self, key: Key, size: int) -> None:
        super().put(key, size)
        self.freq[key] = 0
        if key in self.ghost:
            self.ghost.remove(key)
            self.main.append(key)
        else:
            self.small.append(key)

    def hit(self, key: Key) -> None:
        self.freq[key] = min(self.freq[key] + 1, 3)

    def forget(self, key: Key) -> None:
        super().forget(key)
        (self.small if key in self.small else self.main).remove(key)
        del self.freq[key]

    def victim(self) -> Key | None:
        while True:
            small = [k for k in self.small if k not in self.pinned]
            main = [k for k in self.main if k not in self.pinned]
            if not small and not main:
                return None
            small_bytes = sum(self.size[k] for k in self.small)
            total = sum(self.size.values())
            if small and (small_bytes >= self.small_ratio * total or not main):
                key = small[0]
                if self.freq[key] > 0:
                    self.freq[key] = 0
                    self.small.remove(key)
                    self.main.append(key)
                    continue
                self.forget(key)
                self.ghost.append(key)
                del self.ghost[: max(0, len(self.ghost) - max(len(self.keys), 1))]
                return key
            key = main[0]
            if self.freq[key] > 0:
                self.freq[key] -= 1
                self.main.remove(key)
                self.main.append(key)
                continue
            self.forget(key)
            return key


MODELS: dict[str, Callable[[], PolicyModel]] = {
    m.name: m for m in (FIFOModel, LRUModel, MRUModel, LFUModel, GDSFModel, SIEVEModel, S3FIFOModel)
}
"""The model of each policy, by the policy's ``name``."""
