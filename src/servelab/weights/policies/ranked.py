"""The ranked policies, MRU, LFU and GDSF: the candidate of smallest rank is the victim."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from servelab.native import mypyc_attr
from servelab.weights.policies.interface import K, NoVictim, _Ticking
from servelab.weights.policies.orders import RankOrder


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class _Ranked(_Ticking[K]):
    """A policy whose victim is the candidate of smallest rank; pins just leave the heap."""

    def __init__(self) -> None:
        super().__init__()
        self._ranks: dict[K, tuple[float, ...]] = {}  # every resident key's current rank
        self._candidates: RankOrder[K] = RankOrder()
        self._undo: list[tuple[K, tuple[float, ...], Any]] = []  # this eviction's pops

    def _rerank(self, key: K, rank: tuple[float, ...]) -> None:
        self._ranks[key] = rank
        if key in self._candidates:
            self._candidates.set(key, rank)

    def _forget(self, key: K) -> Any:
        """Drop the per-key history of a key that left the cache; returns what it dropped."""
        return None

    def _recall(self, key: K, history: Any) -> None:
        """Give back what :meth:`_forget` dropped (a victim the cache did not evict after all)."""

    def update_on_remove(self, key: K) -> None:
        if self._ranks.pop(key, None) is not None:
            self._candidates.discard(key)
            self._forget(key)

    def update_on_pin(self, key: K) -> None:
        self._candidates.discard(key)

    def update_on_unpin(self, key: K) -> None:
        self._candidates.set(key, self._ranks[key])

    def pop_victim(self) -> K:
        key = self._candidates.pop()
        rank = self._ranks.pop(key)
        self._undo.append((key, rank, self._forget(key)))
        return key

    def undo_log(self) -> list[tuple[K, tuple[float, ...], Any]]:
        return self._undo

    def restore_victims(self, victims: Sequence[tuple[K, int]]) -> None:
        undo = self._undo
        while undo:
            key, rank, history = undo[-1]
            self._recall(key, history)
            self._ranks[key] = rank
            self._candidates.set(key, rank)
            undo.pop()

    def eviction_order(self) -> list[K]:
        return self._candidates.ordered()

    def __len__(self) -> int:
        return len(self._candidates)


@mypyc_attr(allow_interpreted_subclasses=True)
class MRU(_Ranked[K]):
    """Most recently used goes first: right for a sweep that never comes back to a model."""

    name: ClassVar[str] = "MRU"

    def update_on_put(self, key: K, size: int) -> None:
        if key in self._ranks:
            raise self._duplicate(key)
        rank = (-self._now(),)
        self._ranks[key] = rank
        self._candidates.set(key, rank)

    def update_on_hit(self, key: K) -> None:
        if key not in self._ranks:
            raise self._unknown(key, "update_on_hit")
        self._rerank(key, (-self._now(),))


@mypyc_attr(allow_interpreted_subclasses=True)
class LFU(_Ranked[K]):
    """Least frequently used; ties leave first in, first out.

    A key's count is 1 on ``put`` plus one per hit (hits while pinned count too). Among keys of
    equal count, the one that reached that count first leaves first, as if each count were its
    own FIFO queue. Rank = (count, tick of reaching it): O(log n) per event.
    """

    name: ClassVar[str] = "LFU"

    def __init__(self) -> None:
        super().__init__()
        self._count: dict[K, int] = {}

    def update_on_put(self, key: K, size: int) -> None:
        if key in self._count:
            raise self._duplicate(key)
        self._count[key] = 1
        rank = (1, self._now())
        self._ranks[key] = rank
        self._candidates.set(key, rank)

    def update_on_hit(self, key: K) -> None:
        # The hot path of a cache that mostly hits: _rerank and RankOrder.set, inlined.
        count = self._count.get(key)
        if count is None:
            raise self._unknown(key, "update_on_hit")
        count += 1
        self._count[key] = count
        self._clock = tick = self._clock + 1
        rank = (count, tick)
        self._ranks[key] = rank
        candidates = self._candidates
        live = candidates._rank
        if key in live:
            live[key] = rank
            heap = candidates._heap
            heapq.heappush(heap, (rank, key))
            if len(heap) > 2 * len(live) + 16:
                candidates._compact()

    def _forget(self, key: K) -> int:
        return self._count.pop(key)

    def _recall(self, key: K, history: Any) -> None:
        self._count[key] = history

    def count(self, key: K) -> int:
        """How often ``key`` was used since it was put (for display)."""
        return self._count[key]


def unit_cost(size: int) -> float:
    """GDSF's default miss cost: every miss costs the same, so small models are favoured."""
    return 1.0


@mypyc_attr(allow_interpreted_subclasses=True)
class GDSF(_Ranked[K]):
    """Greedy-Dual-Size-Frequency: priority = L + count × cost(size) / size; lowest goes first.

    With the default unit cost it keeps many small models and evicts large ones: a better
    object hit ratio, a worse byte hit ratio. ``cost=float`` (cost ∝ size, i.e. load time)
    makes it an LFU with aging. ``L`` is the priority of the last victim, so keys that stop
    being used age out instead of living forever on an old count.
    """

    name: ClassVar[str] = "GDSF"

    def __init__(self, cost: Callable[[int], float] = unit_cost) -> None:
        super().__init__()
        self._cost = cost
        self._inflation = 0.0
        self._aged_from = 0.0  # L before the last victim aged it (to undo that pop)
        self._count: dict[K, int] = {}
        self._size: dict[K, int] = {}

    def _priority(self, count: int, size: int) -> float:
        """Computed before anything changes: a cost function that raises leaves no trace."""
        return self._inflation + count * self._cost(size) / size

    def update_on_put(self, key: K, size: int) -> None:
        if key in self._count:
            raise self._duplicate(key)
        if size <= 0:
            raise ValueError(f"update_on_put({key!r}, {size!r}): size must be positive")
        rank = (self._priority(1, size), self._now())
        self._count[key] = 1
        self._size[key] = size
        self._ranks[key] = rank
        self._candidates.set(key, rank)

    def update_on_hit(self, key: K) -> None:
        if key not in self._count:
            raise self._unknown(key, "update_on_hit")
        count = self._count[key] + 1
        rank = (self._priority(count, self._size[key]), self._now())
        self._count[key] = count
        self._rerank(key, rank)

    def pop_victim(self) -> K:
        key = self._candidates.peek()
        if key is None:
            raise NoVictim("no evictable entry")
        self._aged_from = self._inflation
        self._inflation = self._ranks[key][0]
        return super().pop_victim()

    def _forget(self, key: K) -> tuple[int, int, float]:
        return self._count.pop(key), self._size.pop(key), self._aged_from

    def _recall(self, key: K, history: Any) -> None:
        self._count[key], self._size[key], self._inflation = history

    def priority(self, key: K) -> float:
        """The key's current priority (for display)."""
        return self._ranks[key][0]
