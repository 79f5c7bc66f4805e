"""Candidate orders the policies build on: by tick (O(1) at the newest end) and by rank (a heap)."""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Generic

from servelab.native import mypyc_attr
from servelab.weights.policies.interface import K, NoVictim


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class TickOrder(Generic[K]):
    """Candidates ordered by an integer tick, smallest first, with O(1) removal.

    Most insertions carry the newest tick and go to the end of an ``OrderedDict``. A key that
    returns with an *older* tick (unpinned after others were used) goes to a small heap instead;
    the smallest tick is the smaller of the two fronts. Stale heap entries are skipped lazily and
    compacted when they outnumber the live ones.
    """

    __slots__ = ("_heap", "_newest", "_recent", "_tick")

    def __init__(self) -> None:
        self._recent: OrderedDict[K, int] = OrderedDict()
        self._heap: list[tuple[int, K]] = []
        self._tick: dict[K, int] = {}
        self._newest = -1

    def __len__(self) -> int:
        return len(self._tick)

    def __contains__(self, key: object) -> bool:
        return key in self._tick

    def add(self, key: K, tick: int) -> None:
        self._tick[key] = tick
        if tick > self._newest:
            self._recent[key] = tick
            self._newest = tick
        else:
            heapq.heappush(self._heap, (tick, key))

    def touch(self, key: K, tick: int) -> None:
        """Give ``key`` (a candidate) a new, newest tick: the LRU hit path, O(1)."""
        self._tick[key] = tick
        if key in self._recent:
            self._recent[key] = tick
            self._recent.move_to_end(key)
        else:
            self._recent[key] = tick
        self._newest = tick

    def discard(self, key: K) -> None:
        if self._tick.pop(key, None) is not None:
            self._recent.pop(key, None)
            if len(self._heap) > 2 * len(self._tick) + 16:
                self._compact()

    def _clean_heap(self) -> None:
        heap = self._heap
        while heap and (heap[0][1] in self._recent or self._tick.get(heap[0][1]) != heap[0][0]):
            heapq.heappop(heap)

    def _compact(self) -> None:
        self._heap = [
            (t, k) for t, k in self._heap if k not in self._recent and self._tick.get(k) == t
        ]
        heapq.heapify(self._heap)

    def peek(self) -> K | None:
        self._clean_heap()
        first = next(iter(self._recent.items()), None)
        if self._heap and (first is None or self._heap[0][0] < first[1]):
            return self._heap[0][1]
        return first[0] if first is not None else None

    def pop(self) -> K:
        if not self._heap and self._recent:  # the common case: no key came back from a pin
            first, _ = self._recent.popitem(last=False)
            del self._tick[first]
            return first
        key = self.peek()
        if key is None:
            raise NoVictim("no evictable entry")
        self.discard(key)
        return key

    def ordered(self) -> list[K]:
        return sorted(self._tick, key=self._tick.__getitem__)


@mypyc_attr(allow_interpreted_subclasses=True)
class RankOrder(Generic[K]):
    """Candidates ordered by a rank tuple, smallest first: a heap with lazy invalidation.

    A key's rank can change (a hit raises an LFU count); the old heap entry is left behind and
    skipped when it surfaces, and the heap is rebuilt when stale entries outnumber live ones,
    so every operation is O(log n) amortized. Ranks end with a unique tick, so two entries
    never compare equal and keys are never compared.
    """

    __slots__ = ("_heap", "_rank")

    def __init__(self) -> None:
        self._rank: dict[K, tuple[float, ...]] = {}
        self._heap: list[tuple[tuple[float, ...], K]] = []

    def __len__(self) -> int:
        return len(self._rank)

    def __contains__(self, key: object) -> bool:
        return key in self._rank

    def set(self, key: K, rank: tuple[float, ...]) -> None:
        self._rank[key] = rank
        heapq.heappush(self._heap, (rank, key))
        if len(self._heap) > 2 * len(self._rank) + 16:
            self._compact()

    def discard(self, key: K) -> None:
        self._rank.pop(key, None)

    def _compact(self) -> None:
        rank = self._rank
        self._heap = [(r, k) for r, k in self._heap if rank.get(k) == r]
        heapq.heapify(self._heap)

    def peek(self) -> K | None:
        heap, rank = self._heap, self._rank
        while heap and rank.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][1] if heap else None

    def pop(self) -> K:
        key = self.peek()
        if key is None:
            raise NoVictim("no evictable entry")
        heapq.heappop(self._heap)
        del self._rank[key]
        return key

    def rank(self, key: K) -> tuple[float, ...]:
        return self._rank[key]

    def ordered(self) -> list[K]:
        return sorted(self._rank, key=self._rank.__getitem__)
