"""Eviction policies behind one interface.

The interface follows the shape of LMCache's cache policies (update on put, on hit, on a removal
the policy did not choose, then "give me a victim"), with one change that matters on a serving
node: the cache also tells the policy when an entry is pinned and unpinned. Pinned entries are
kept *out* of the candidate structure instead of being skipped by a scan, so choosing a victim
costs the same whether one entry is pinned or ten thousand are.

Pinning does not rewrite history. A pinned entry's recency (LRU) or arrival (FIFO) keeps being
tracked, and on its last unpin it becomes a candidate again at the place that history gives it.
That is exactly the rule of the simple model the graders use: one ordered list of resident keys,
eviction takes the first unpinned one.
"""

from __future__ import annotations

import bisect
import copy
import heapq
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

__all__ = [
    "FIFO",
    "GDSF",
    "LFU",
    "LRU",
    "MRU",
    "POLICIES",
    "S3FIFO",
    "SIEVE",
    "EvictionPolicy",
    "NoVictim",
    "RankOrder",
    "TickOrder",
]


class NoVictim(LookupError):
    """Every resident entry is pinned: there is nothing the policy may evict."""


class EvictionPolicy(ABC, Generic[K]):
    """Orders the *evictable* (unpinned) resident keys; the cache reports every event to it."""

    name: ClassVar[str] = "policy"

    @abstractmethod
    def update_on_put(self, key: K, size: int) -> None:
        """A new resident key, unpinned."""

    @abstractmethod
    def update_on_hit(self, key: K) -> None:
        """A ``get`` found ``key`` (pinned or not)."""

    @abstractmethod
    def update_on_remove(self, key: K) -> None:
        """``key`` left the cache without the policy choosing it (replaced or deleted)."""

    @abstractmethod
    def update_on_pin(self, key: K) -> None:
        """First pin: ``key`` stops being a candidate."""

    @abstractmethod
    def update_on_unpin(self, key: K) -> None:
        """Last unpin: ``key`` is a candidate again, where its history places it."""

    @abstractmethod
    def pop_victim(self) -> K:
        """Choose the next victim among the candidates and forget it; :class:`NoVictim` if none."""

    @abstractmethod
    def eviction_order(self) -> list[K]:
        """The candidates, next victim first. For inspection: changes no state."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of candidates (evictable keys)."""

    def hit_hook(self) -> Callable[[K], object] | None:
        """What the cache calls on each hit; bound once, when the cache is built.

        ``update_on_hit`` by default, and ``None`` for a policy whose order hits never change.
        A policy may return something cheaper, such as a C method of its own structure, on one
        condition: it raises ``KeyError`` for any key that needs the full ``update_on_hit``,
        which the cache then calls. Hits are most of a cache's traffic; this is where a Python
        frame per hit is saved.
        """
        return self.update_on_hit

    def put_hook(self) -> Callable[[K, int], object]:
        """What the cache calls to admit a key: ``update_on_put``, or a cheaper callable with
        exactly its effect (bound once, like :meth:`hit_hook`)."""
        return self.update_on_put

    def pop_victims(self, over: int, sizes: Mapping[K, int], victims: list[K]) -> int:
        """Call :meth:`pop_victim` until the victims' ``sizes`` add up to ``over`` bytes, appending
        each to ``victims`` (passed empty); returns the bytes they free.

        What the cache calls to make room: one call per eviction, so a policy may choose several
        victims in one Python frame. A victim missing from ``sizes`` ends the loop early (the
        cache then names the policy inconsistent). An override must pop exactly what
        :meth:`pop_victim` would, in the same order, and log each pop in :meth:`undo_log`.
        """
        pop_victim = self.pop_victim
        freed = 0
        while freed < over:
            victim = pop_victim()
            victims.append(victim)
            size = sizes.get(victim, 0)  # sizes are positive: 0 means absent
            if not size:
                break
            freed += size
        return freed

    def undo_log(self) -> list[Any] | None:
        """A list where :meth:`pop_victim` records how to undo each pop, or None (the default).

        The cache empties it before each eviction, so it only ever holds the current one's pops.
        """
        return None

    def restore_victims(self, victims: Sequence[tuple[K, int]]) -> None:
        """Take back the victims (``(key, size)``, pop order) of an eviction the cache abandoned.

        The cache calls this when a later ``pop_victim`` or the admission of the new key raised:
        those keys stay resident, so the policy must hold them again. The default re-admits them
        with ``update_on_put``, at the newest end; the built-in policies replay their undo log
        instead, so the order is exactly what it was before the eviction began.
        """
        for key, size in victims:
            self.update_on_put(key, size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


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


class _Returned:
    """An undo record of _ParkingQueue: a parked key that pop_victim took, with its number."""

    __slots__ = ("key", "number")

    def __init__(self, key: Any, number: int) -> None:
        self.key: Any = key
        self.number = number


class _ParkingQueue(EvictionPolicy[K]):
    """One queue of every resident key, oldest first, where the front is the next victim.

    The structure LRU and FIFO share; they differ only in what a hit does. All resident keys,
    pinned ones included, live in one ``OrderedDict``. When a victim is chosen and a pinned key
    is at the front, that key is *parked*: moved aside, once, with a sequence number. Every
    parked key is older than every key still in the queue, so a parked key that is unpinned is
    the next victim, oldest parked first (a small heap). Each pin costs at most one park, so
    eviction stays amortized O(1) however many entries are pinned, and the order is exactly the
    model's: one list, the first unpinned key goes.

    Every update changes its structures with statements that CPython never interrupts (``del``,
    item assignment) and makes at most one mutating call, last; so an asynchronous exception
    (a Ctrl-C) lands before or after an update, never halfway through it. The one exception,
    :meth:`pop_victims`, logs its victims before deleting them: an interrupt between two
    deletions is undone with the rest by :meth:`restore_victims`.
    """

    def __init__(self) -> None:
        self._recent: OrderedDict[K, int] = OrderedDict()  # key -> size; never parked
        self._pinned: set[K] = set()
        self._parked: dict[K, int] = {}  # key -> park number; all older than _recent
        self._returned: dict[K, int] = {}  # parked and no longer pinned: candidates
        self._heap: list[tuple[int, K]] = []  # (park number, key) of returned keys; lazy
        self._parks = 0
        self._undo: list[Any] = []  # this eviction's pops: a key, or a _Returned
        # A subclass with its own pop_victim sees every pop through it (pop_victims' rule).
        self._front_is_victim = type(self).pop_victim is _ParkingQueue.pop_victim

    def update_on_put(self, key: K, size: int) -> None:
        self._recent[key] = size

    def put_hook(self) -> Callable[[K, int], object]:
        # A new key is never in _recent, so setdefault(key, size) is update_on_put, in C.
        return self._recent.setdefault

    def _holds(self, key: K) -> bool:
        return key in self._recent or key in self._parked

    def update_on_remove(self, key: K) -> None:
        if key in self._recent:
            del self._recent[key]
        elif key in self._parked:
            del self._parked[key]
            if key in self._returned:
                del self._returned[key]
        else:
            return
        self._pinned.discard(key)

    def update_on_pin(self, key: K) -> None:
        if key in self._returned:
            del self._returned[key]  # its heap entry goes stale
        self._pinned.add(key)

    def update_on_unpin(self, key: K) -> None:
        number = self._parked.get(key)
        if number is not None:
            heapq.heappush(self._heap, (number, key))  # stale until _returned says otherwise
            self._returned[key] = number
        self._pinned.discard(key)

    def undo_log(self) -> list[Any]:
        return self._undo

    def pop_victim(self) -> K:
        if not self._pinned and not self._returned:  # nothing pinned or parked: the front
            recent = self._recent
            for key in recent:  # noqa: B007 - the front key, without a call
                break
            else:
                raise NoVictim("the cache is empty")
            del recent[key]
            self._undo.append(key)
            return key
        returned = self._returned
        if returned:  # parked keys are older than everything in _recent
            heap = self._heap
            while returned.get(heap[0][1]) != heap[0][0]:
                heapq.heappop(heap)  # stale: pinned again, touched or removed since
            number, key = heap[0]
            del returned[key], self._parked[key]
            self._undo.append(_Returned(key, number))
            heapq.heappop(heap)
            return key
        recent, pinned, parked = self._recent, self._pinned, self._parked
        while True:
            for key in recent:  # noqa: B007 - the front key, without a call
                break
            else:
                raise NoVictim("every resident entry is pinned")
            if key not in pinned:
                break
            del recent[key]  # pinned at the front: park it
            self._parks += 1
            parked[key] = self._parks
        del recent[key]
        self._undo.append(key)
        return key

    def pop_victims(self, over: int, sizes: Mapping[K, int], victims: list[K]) -> int:
        # Nothing pinned or parked (the common case): the victims are the front keys, read in
        # one pass, then logged and deleted; no call per victim. Otherwise, or when a subclass
        # chooses its own victims, one pop_victim at a time.
        if self._pinned or self._returned or not self._front_is_victim:
            return super().pop_victims(over, sizes, victims)
        freed = 0
        for key in self._recent:
            victims.append(key)
            size = sizes.get(key, 0)  # 0: absent, the cache rejects it
            freed += size
            if not size or freed >= over:
                break
        else:
            raise NoVictim("not enough evictable entries")  # nothing was popped
        recent = self._recent
        self._undo.extend(victims)  # logged first: an interrupt below leaves them all undoable
        for key in victims:
            del recent[key]
        return freed

    def restore_victims(self, victims: Sequence[tuple[K, int]]) -> None:
        undo, recent = self._undo, self._recent
        while undo:
            pop = undo[-1]
            if type(pop) is _Returned:  # a parked key, unpinned since
                heapq.heappush(self._heap, (pop.number, pop.key))
                self._parked[pop.key] = pop.number
                self._returned[pop.key] = pop.number
            else:  # the front of the queue
                recent[pop] = 0
                recent.move_to_end(pop, last=False)
            undo.pop()

    def eviction_order(self) -> list[K]:
        returned = sorted(self._returned, key=self._returned.__getitem__)
        return returned + [k for k in self._recent if k not in self._pinned]

    def history_order(self) -> list[K]:
        """Every resident key, pinned ones included, in queue order (next victim first)."""
        return sorted(self._parked, key=self._parked.__getitem__) + list(self._recent)

    def __len__(self) -> int:
        return len(self._recent) + len(self._parked) - len(self._pinned)


class LRU(_ParkingQueue[K]):
    """Least recently used: ``get`` and ``put`` refresh a key; the stalest candidate goes first.

    The default policy. A hit moves the key to the back of the queue: one ``move_to_end``,
    called by the cache directly (:meth:`hit_hook`). A hit on a parked key brings it back into
    the queue, at the back.
    """

    name: ClassVar[str] = "LRU"

    def hit_hook(self) -> Callable[[K], object]:
        # A key missing from _recent is parked (KeyError): the cache falls back to update_on_hit.
        return self._recent.move_to_end

    def update_on_hit(self, key: K) -> None:
        recent = self._recent
        if key in recent:
            recent.move_to_end(key)
        elif key in self._parked:  # back into the recency order, at the newest end
            recent[key] = 0  # the size is not used
            del self._parked[key]
            if key in self._returned:
                del self._returned[key]


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


class _Ticking(EvictionPolicy[K]):
    """Shared clock: every event gets a unique, increasing tick (the policies' notion of time).

    Events about keys break the contract loudly and before any change: ``update_on_put`` of a
    key the policy already holds raises ``ValueError``, a hit on a key it does not hold raises
    ``KeyError``.
    """

    def __init__(self) -> None:
        self._clock = 0

    def _now(self) -> int:
        self._clock += 1
        return self._clock

    @staticmethod
    def _duplicate(key: object) -> ValueError:
        return ValueError(f"update_on_put({key!r}): the key is already resident; remove it first")

    @staticmethod
    def _unknown(key: object, event: str) -> KeyError:
        return KeyError(f"{event}({key!r}): the policy holds no such key")


class FIFO(_ParkingQueue[K]):
    """First in, first out: hits change nothing; the oldest arrival among candidates goes first.

    The same queue as LRU's, with nothing to do on a hit. Breaking the contract raises before
    any change, as for the other policies (``ValueError`` for a second put of a resident key,
    ``KeyError`` for a hit on an unknown one); the cache's own hooks skip those checks.
    """

    name: ClassVar[str] = "FIFO"

    def update_on_put(self, key: K, size: int) -> None:
        if self._holds(key):
            raise _Ticking._duplicate(key)
        self._recent[key] = size

    def update_on_hit(self, key: K) -> None:
        if not self._holds(key):
            raise _Ticking._unknown(key, "update_on_hit")

    def hit_hook(self) -> None:
        return None  # arrival order ignores hits


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
            bisect.insort(self._queue, tick)
        self._at[tick] = key

    def pop_victim(self) -> K:
        queue, visited, at = self._queue, self._visited, self._at
        if not at:
            raise NoVictim("no evictable entry")
        i = bisect.bisect_left(queue, self._hand)
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
            i = bisect.bisect_left(queue, hand)
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


class S3FIFO(_Ticking[K]):
    """S3-FIFO (SOSP'23): a small FIFO for newcomers, a main FIFO, and a ghost list of ids.

    New keys enter the small queue; a key found in the ghost list (recently evicted from the
    small queue) enters the main queue directly. A hit bumps a 2-bit counter (at most 3).
    Evicting from the small queue (while it holds at least ``small_ratio`` of the resident
    bytes, or the main queue has no candidate) moves a key that was hit there into the main
    queue and evicts one that was not, remembering its id in the ghost list. Evicting from the
    main queue gives a key with a non-zero counter another round (counter − 1, back to the
    end) and evicts one at zero. Most one-hit wonders leave after a short stay in the small
    queue without ever displacing the main queue.

    Sizes are in bytes; the ghost list remembers as many ids as there are resident keys.
    Pinned keys leave their queue and come back at their place in it.
    """

    name: ClassVar[str] = "S3-FIFO"

    def __init__(self, small_ratio: float = 0.1) -> None:
        if not 0.0 < small_ratio < 1.0:
            raise ValueError(f"small_ratio must be between 0 and 1, got {small_ratio}")
        super().__init__()
        self.small_ratio = small_ratio
        self._small: TickOrder[K] = TickOrder()
        self._main: TickOrder[K] = TickOrder()
        self._in_small: dict[K, bool] = {}  # every resident key: which queue it belongs to
        self._entered: dict[K, int] = {}  # tick at which it entered that queue
        self._freq: dict[K, int] = {}
        self._size: dict[K, int] = {}
        self._small_bytes = 0
        self._total_bytes = 0
        self._ghost: OrderedDict[K, None] = OrderedDict()
        self._undo: list[list[tuple[Any, ...]]] = []  # per pop of this eviction: its steps

    def _enter(self, key: K, small: bool) -> None:
        tick = self._now()
        self._in_small[key] = small
        self._entered[key] = tick
        (self._small if small else self._main).add(key, tick)

    def update_on_put(self, key: K, size: int) -> None:
        if key in self._size:
            raise self._duplicate(key)
        recently_evicted = key in self._ghost
        if recently_evicted:
            del self._ghost[key]
        small = not recently_evicted
        self._freq[key] = 0
        self._size[key] = size
        self._total_bytes += size
        if small:
            self._small_bytes += size
        self._enter(key, small)

    def update_on_hit(self, key: K) -> None:
        if key not in self._freq:
            raise self._unknown(key, "update_on_hit")
        self._freq[key] = min(self._freq[key] + 1, 3)

    def _drop(self, key: K) -> None:
        size = self._size.pop(key)
        self._total_bytes -= size
        if self._in_small.pop(key):
            self._small_bytes -= size
        del self._entered[key]
        del self._freq[key]

    def update_on_remove(self, key: K) -> None:
        if key in self._size:
            self._small.discard(key)
            self._main.discard(key)
            self._drop(key)

    def update_on_pin(self, key: K) -> None:
        (self._small if self._in_small[key] else self._main).discard(key)

    def update_on_unpin(self, key: K) -> None:
        (self._small if self._in_small[key] else self._main).add(key, self._entered[key])

    def _remember(self, key: K) -> list[K]:
        """Put ``key`` in the ghost list; returns the oldest ids it pushed out."""
        self._ghost[key] = None
        forgotten = []
        while len(self._ghost) > max(len(self._size), 1):
            forgotten.append(self._ghost.popitem(last=False)[0])
        return forgotten

    def pop_victim(self) -> K:
        small, main, freq = self._small, self._main, self._freq
        if not small and not main:
            raise NoVictim("no evictable entry")
        steps: list[tuple[Any, ...]] = []  # how to undo this pop, step by step
        self._undo.append(steps)
        while True:
            if small and (self._small_bytes >= self.small_ratio * self._total_bytes or not main):
                key = small.pop()
                state = (key, self._entered[key], freq[key])
                if freq[key] > 0:  # reused while on probation: promote
                    steps.append(("promoted", *state))
                    freq[key] = 0
                    self._small_bytes -= self._size[key]
                    self._enter(key, False)
                    continue
                steps.append(("dropped", *state, True, self._size[key]))
                self._drop(key)
                steps.append(("ghost", key, self._remember(key)))
                return key
            key = main.pop()
            state = (key, self._entered[key], freq[key])
            if freq[key] > 0:  # still in use: one more round
                steps.append(("again", *state))
                freq[key] -= 1
                self._enter(key, False)
                continue
            steps.append(("dropped", *state, False, self._size[key]))
            self._drop(key)
            return key

    def undo_log(self) -> list[list[tuple[Any, ...]]]:
        return self._undo

    def restore_victims(self, victims: Sequence[tuple[K, int]]) -> None:
        undo = self._undo
        while undo:
            for step in reversed(undo[-1]):
                self._undo_step(step)
            undo.pop()

    def _undo_step(self, step: tuple[Any, ...]) -> None:
        kind, key = step[0], step[1]
        if kind == "ghost":
            del self._ghost[key]
            for old in reversed(step[2]):
                self._ghost[old] = None
                self._ghost.move_to_end(old, last=False)
            return
        entered, freq = step[2], step[3]
        if kind == "dropped":
            small, size = step[4], step[5]
            self._size[key] = size
            self._total_bytes += size
            if small:
                self._small_bytes += size
        else:  # promoted from the small queue, or given another round in the main queue
            self._main.discard(key)
            small = kind == "promoted"
            if small:
                self._small_bytes += self._size[key]
        self._in_small[key] = small
        self._entered[key] = entered
        self._freq[key] = freq
        (self._small if small else self._main).add(key, entered)

    def eviction_order(self) -> list[K]:
        trial = copy.deepcopy(self)
        return [trial.pop_victim() for _ in range(len(trial))]

    def __len__(self) -> int:
        return len(self._small) + len(self._main)


POLICIES: dict[str, Callable[[], EvictionPolicy[Any]]] = {
    "FIFO": FIFO,
    "LRU": LRU,
    "MRU": MRU,
    "LFU": LFU,
    "SIEVE": SIEVE,
    "S3-FIFO": S3FIFO,
    "GDSF": GDSF,
}
"""Every policy by its ``name``, as a factory of fresh instances."""
