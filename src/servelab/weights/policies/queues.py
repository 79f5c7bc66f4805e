"""The queue policies, LRU and FIFO: one queue of every resident key, pinned keys parked aside."""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from servelab.native import mypyc_attr
from servelab.weights.policies.interface import EvictionPolicy, K, NoVictim, _Ticking


class _Returned:
    """An undo record of _ParkingQueue: a parked key that pop_victim took, with its number."""

    __slots__ = ("key", "number")

    def __init__(self, key: Any, number: int) -> None:
        self.key: Any = key
        self.number = number


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
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


@mypyc_attr(allow_interpreted_subclasses=True)
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


@mypyc_attr(allow_interpreted_subclasses=True)
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
