"""S3-FIFO: a small FIFO for newcomers, a main FIFO, and a ghost list of ids."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, ClassVar

from servelab.native import mypyc_attr
from servelab.weights.policies.interface import K, NoVictim, _Ticking
from servelab.weights.policies.orders import TickOrder


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
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
            steps = undo[-1]
            for step in steps[::-1]:  # not reversed(): mypyc (2.4) fails on it here
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
