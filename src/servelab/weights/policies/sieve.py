"""SIEVE: a FIFO queue, a visited bit per key, and a hand that sweeps it."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from typing import ClassVar

from servelab.native import mypyc_attr
from servelab.weights.policies.interface import K, NoVictim, _Ticking


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class SIEVE(_Ticking[K]):
    """SIEVE (NSDI'24): a FIFO queue, a visited bit per key, and a hand that sweeps it.

    A hit only sets the key's bit. To evict, the hand moves from the oldest key towards the
    newest: a visited key has its bit cleared and stays, the first unvisited key is evicted,
    and the hand rests just past it for next time; past the newest key it wraps to the oldest.
    Survivors keep their place, so new keys that are never reused leave quickly.

    The queue is a sorted list of arrival ticks; the hand is a tick (the next key it examines
    is the first candidate at or after it), so pinning, unpinning and removal never leave it
    dangling. A key that leaves the candidates (evicted, removed, pinned) only has its tick
    marked dead, and dead ticks are dropped in one pass when they outnumber the live ones: every
    operation is O(1) amortized, plus O(log n) to find the hand, and an unpin after such a pass
    puts the tick back with one insertion.
    """

    name: ClassVar[str] = "SIEVE"

    def __init__(self) -> None:
        super().__init__()
        self._arrival: dict[K, int] = {}  # every resident key
        self._visited: set[K] = set()  # resident keys whose bit is set
        self._queue: list[int] = []  # arrival ticks, oldest first: live and dead
        self._at: dict[int, K] = {}  # live tick -> candidate
        self._dead: set[int] = set()  # ticks in the queue whose key is not a candidate
        self._hand = 0
        self._undo: list[tuple[K, int, list[K], int]] = []  # this eviction's pops

    def update_on_put(self, key: K, size: int) -> None:
        if key in self._arrival:
            raise self._duplicate(key)
        tick = self._now()
        self._arrival[key] = tick
        self._queue.append(tick)
        self._at[tick] = key

    def update_on_hit(self, key: K) -> None:
        if key not in self._arrival:
            raise self._unknown(key, "update_on_hit")
        self._visited.add(key)

    def hit_hook(self) -> Callable[[K], object]:
        return self._visited.add  # setting the bit of a resident key, in C

    def _leave_queue(self, tick: int) -> None:
        if self._at.pop(tick, None) is not None:
            self._dead.add(tick)
            if len(self._dead) > len(self._at) + 16:
                at = self._at
                self._queue = [t for t in self._queue if t in at]
                self._dead.clear()

    def update_on_remove(self, key: K) -> None:
        if key in self._arrival:
            self._leave_queue(self._arrival.pop(key))
            self._visited.discard(key)
            self._settle_hand()

    def _settle_hand(self) -> None:
        """With no resident key at or after the hand, the next sweep starts at the oldest."""
        arrival = self._arrival
        if not arrival or self._hand > arrival[next(reversed(arrival))]:
            self._hand = 0

    def update_on_pin(self, key: K) -> None:
        self._leave_queue(self._arrival[key])

    def update_on_unpin(self, key: K) -> None:
        tick = self._arrival[key]
        if tick in self._at:  # already a candidate
            return
        if tick in self._dead:
            self._dead.remove(tick)
        else:
            insort(self._queue, tick)
        self._at[tick] = key

    def pop_victim(self) -> K:
        queue, visited, at = self._queue, self._visited, self._at
        if not at:
            raise NoVictim("no evictable entry")
        i = bisect_left(queue, self._hand)
        n = len(queue)
        cleared: list[K] = []
        while True:
            if i == n:
                i = 0  # past the newest: wrap to the oldest
            tick = queue[i]
            key = at.get(tick)
            if key is None:  # dead: evicted, removed or pinned
                i += 1
                continue
            if key in visited:
                visited.remove(key)  # clear the bit
                cleared.append(key)
                i += 1
                continue
            self._undo.append((key, tick, cleared, self._hand))
            del self._arrival[key]
            self._leave_queue(tick)
            self._hand = tick + 1
            self._settle_hand()
            return key

    def undo_log(self) -> list[tuple[K, int, list[K], int]]:
        return self._undo

    def restore_victims(self, victims: Sequence[tuple[K, int]]) -> None:
        undo = self._undo
        if not undo:
            return
        while undo:
            key, tick, cleared, hand = undo.pop()
            self._arrival[key] = tick
            self.update_on_unpin(key)  # back into the queue at its arrival tick
            self._visited.update(cleared)
            self._hand = hand
        # _settle_hand reads the newest arrival last: keep the dict in arrival order
        self._arrival = dict(sorted(self._arrival.items(), key=lambda kv: kv[1]))

    def eviction_order(self) -> list[K]:
        order: list[K] = []
        queue = [t for t in self._queue if t in self._at]
        candidates = {self._at[t] for t in queue}
        visited = {k: k in self._visited for k in candidates}
        newest_pinned = max((t for k, t in self._arrival.items() if k not in candidates), default=0)
        hand = self._hand
        while queue:
            if hand > max(queue[-1], newest_pinned):
                hand = 0
            i = bisect_left(queue, hand)
            while True:
                if i == len(queue):
                    i = 0
                key = self._at[queue[i]]
                if visited[key]:
                    visited[key] = False
                    i += 1
                    continue
                hand = queue.pop(i) + 1
                order.append(key)
                break
        return order

    def visited(self, key: K) -> bool:
        """The key's visited bit (for display)."""
        if key not in self._arrival:
            raise self._unknown(key, "visited")
        return key in self._visited

    def __len__(self) -> int:
        return len(self._at)
