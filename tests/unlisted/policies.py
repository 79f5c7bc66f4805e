"""Eviction-policy slips, each on the notebook's own LFU and SIEVE classes."""

import copy
import heapq

from servelab import checkpoint
from servelab.weights.policies import NoVictim

TOPIC = "eviction-policy"
FINAL = checkpoint(TOPIC, 4)
LFU = FINAL["LFU"]
SIEVE = FINAL["SIEVE"]
ALONE = checkpoint(TOPIC, 2)  # steps 1 and 2 grade LFU alone
REMOVALS = checkpoint(TOPIC, 3)


class LFUPinResetsCount(LFU):
    """A pin sets the key's count back to 1: it comes back as if new."""

    def update_on_pin(self, key):
        self.pinned.add(key)
        self.count[key] = 1


class SIEVELenOneShort(SIEVE):
    """Off by one: one candidate fewer than there are."""

    def __len__(self):
        return max(0, len(self.queue) - len(self.pinned) - 1)


class SIEVEPopReturnsNone(SIEVE):
    """Returns None when there is no victim instead of raising NoVictim."""

    def pop_victim(self):
        if len(self) == 0:
            return None
        return SIEVE.pop_victim(self)


class SIEVEPutResetsHand(SIEVE):
    """A put sends the hand back to the oldest key."""

    def update_on_put(self, key, size):
        SIEVE.update_on_put(self, key, size)
        self.hand = None


class LFUVictimStaysCounted(LFU):
    """pop_victim takes the key off the heap but never forgets its count."""

    def pop_victim(self):
        while self.heap:
            count, reached, key = heapq.heappop(self.heap)
            if key not in self.pinned and (self.count.get(key), self.reached.get(key)) == (
                count,
                reached,
            ):
                return key
        raise NoVictim("every resident key is pinned")


class LFUHitPushesOldCount(LFU):
    """Pushes the heap entry before raising the count: the entry is stale at once."""

    def update_on_hit(self, key):
        self.clock += 1
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))
        self.count[key] += 1
        self.reached[key] = self.clock


class SIEVERemoveKeepsPin(SIEVE):
    """Removing a key forgets its place and its bit but not its pin: put again, it is pinned."""

    def update_on_remove(self, key):
        i = self.queue.index(key)
        if self.hand == key:
            self.hand = self.queue[i + 1] if i + 1 < len(self.queue) else None
        del self.queue[i]
        del self.visited[key]


class SIEVEPinnedHitsForgotten(SIEVE):
    """A hit on a pinned key is dropped: the key is not marked visited."""

    def update_on_hit(self, key):
        if key not in self.pinned:
            self.visited[key] = True


class SIEVESweepForgetsPinnedBits(SIEVE):
    """The sweep clears the bit of every key it passes, pinned ones too: a pinned key loses
    the hit it took before the pin."""

    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
            key = self.queue[i]
            if key in self.pinned or self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.hand = key
                self.update_on_remove(key)
                return key


class LFULenOfUnpinnedHeapEntries(LFU):
    """len() counts the heap's entries of unpinned keys: stale entries left by hits count too."""

    def __len__(self):
        return sum(1 for _, _, key in self.heap if key not in self.pinned)


class SIEVEPopRaisesLookupError(SIEVE):
    """With every key pinned, raises a plain LookupError of its own, not the notebook's
    NoVictim."""

    def pop_victim(self):
        if not any(key not in self.pinned for key in self.queue):
            raise LookupError("nothing to evict")
        return super().pop_victim()


class SIEVESweepRotated(SIEVE):
    """Rotates the queue to start just after the hand: the key under the hand, the next
    candidate, is looked at last."""

    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        start = 0 if self.hand is None else (self.queue.index(self.hand) + 1) % len(self.queue)
        while True:
            for key in self.queue[start:] + self.queue[:start]:
                if key in self.pinned:
                    continue
                if self.visited[key]:
                    self.visited[key] = False
                    continue
                self.hand = key
                self.update_on_remove(key)
                return key


class SIEVEOrderSharesBits(SIEVE):
    """eviction_order copies the queue for its trial but shares the visited bits: asking for
    the order clears the real policy's bits."""

    def eviction_order(self):
        trial = copy.copy(self)
        trial.queue = list(self.queue)
        trial.pinned = set(self.pinned)
        trial.visited = {k: v for k, v in self.visited.items()}
        order = []
        for _ in range(len(trial)):
            key = trial.pop_victim()
            self.visited[key] = trial.visited.get(key, False) and self.visited[key]
            order.append(key)
        for key in self.queue:
            if key not in trial.visited:
                self.visited[key] = False
        return order


class LFUPutPushesCountZero(LFU):
    """Pushes a new key's heap entry with count 0 while its count is 1: the entry is stale at
    once, and the key is never evicted until a hit pushes a current one."""

    def update_on_put(self, key, size):
        self.clock += 1
        heapq.heappush(self.heap, (0, self.clock, key))
        self.count[key] = 1
        self.reached[key] = self.clock


class LFUUnpinTicksAfterPinnedHit(LFU):
    """An unpin after a hit taken while pinned dates the key's count from the unpin: keys
    that reached the same count in between now leave first."""

    def update_on_hit(self, key):
        if key in self.pinned:
            self.hit_while_pinned = getattr(self, "hit_while_pinned", set()) | {key}
        super().update_on_hit(key)

    def update_on_unpin(self, key):
        if key in getattr(self, "hit_while_pinned", set()):
            self.hit_while_pinned.discard(key)
            self.clock += 1
            self.reached[key] = self.clock
        super().update_on_unpin(key)


class LFUPinReplacesSet(ALONE):
    """Assigns a new set on a pin: pinning one key unpins every other."""

    def update_on_pin(self, key):
        self.pinned = {key}


class LFUUnpinKeepsPinned(ALONE):
    """Pushes the heap entry back on an unpin but leaves the key in `pinned`."""

    def update_on_unpin(self, key):
        heapq.heappush(self.heap, (self.count[key], self.reached[key], key))


class SIEVEUnpinMarksVisited(REMOVALS["SIEVE"]):
    """Takes an unpin for a use: the key comes back visited."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.visited[key] = True


class SIEVESweepStaysOnVisited(SIEVE):
    """Clears a visited bit but does not move on: the visited key goes on the next look."""

    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
            else:
                self.hand = key
                self.update_on_remove(key)
                return key


class SIEVEOrderIsQueue(SIEVE):
    """Lists the unpinned keys in queue order, as if the hand and the bits did not order them."""

    def eviction_order(self):
        return [k for k in self.queue if k not in self.pinned]


class LFUPopStopsAtStale(ALONE):
    """Pops one heap entry only: a stale first entry ends the pop with NoVictim."""

    def pop_victim(self):
        if self.heap:
            count, reached, key = heapq.heappop(self.heap)
            current = (self.count.get(key), self.reached.get(key))
            if key not in self.pinned and current == (count, reached):
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")


class SIEVEOrderOneShort(SIEVE):
    """Trials one pop fewer than len(): the last candidate is missing from the order."""

    def eviction_order(self):
        trial = copy.deepcopy(self)
        return [trial.pop_victim() for _ in range(len(trial) - 1)]


class LFUUnpinCountsUse(ALONE):
    """Counts the unpin as a use: the key comes back with one more."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.count[key] += 1
        heapq.heappush(self.heap, (self.count[key], self.reached[key], key))


class SIEVEWrapsOneEarly(SIEVE):
    """Off by one in the wrap test (``i >= len(queue) - 1``): the sweep turns back to the
    oldest key one key early and never examines the newest on its way."""

    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i >= len(self.queue) - 1:
                i = 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.hand = key
                self.update_on_remove(key)
                return key


class LFUOrderByCountOnly(ALONE):
    """Sorts by count alone: equal counts keep the order of the puts (the dict's), not the
    time each reached its count. Keys put in key order look sorted by key."""

    def eviction_order(self):
        return sorted((k for k in self.count if k not in self.pinned), key=lambda k: self.count[k])


class LFULenOfHeapKeys(ALONE):
    """len() counts the distinct keys on the heap that are not pinned: a popped key's stale
    entries still count (the pins are right)."""

    def __len__(self):
        return len({k for _, _, k in self.heap} - self.pinned)


class SIEVESweepOneTooFar(SIEVE):
    """Off by one: evicts the candidate after the first unvisited key it reaches (the right
    way round, one key too far)."""

    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        found = False
        while True:
            if i >= len(self.queue):
                i = 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif found or not self.visited[key]:
                if found or len(self) == 1:
                    self.hand = key
                    self.update_on_remove(key)
                    return key
                found = True
                i += 1
            else:
                self.visited[key] = False
                i += 1


MISTAKES = {
    "LFU victim keeps its count": (
        4,
        {"LFU": LFUVictimStaysCounted, "SIEVE": SIEVE},
        {"LFU.pop_victim"},
    ),
    "LFU heap entry pushed with the old count": (
        4,
        {"LFU": LFUHitPushesOldCount, "SIEVE": SIEVE},
        {"LFU.update_on_hit"},
    ),
    "SIEVE removal keeps the pin": (
        4,
        {"LFU": LFU, "SIEVE": SIEVERemoveKeepsPin},
        {"SIEVE.update_on_remove"},
    ),
    "SIEVE hit on a pinned key forgotten": (
        4,
        {"LFU": LFU, "SIEVE": SIEVEPinnedHitsForgotten},
        {"SIEVE.update_on_hit"},
    ),
    "SIEVE sweep clears pinned keys' bits": (
        4,
        {"LFU": LFU, "SIEVE": SIEVESweepForgetsPinnedBits},
        {"SIEVE.pop_victim"},
    ),
    "LFU len counts stale heap entries": (
        4,
        {"LFU": LFULenOfUnpinnedHeapEntries, "SIEVE": SIEVE},
        {"LFU.__len__"},
    ),
    "LFU pin resets the count": (
        4,
        {"LFU": LFUPinResetsCount, "SIEVE": SIEVE},
        {"LFU.update_on_pin"},
    ),
    "SIEVE len one short": (4, {"LFU": LFU, "SIEVE": SIEVELenOneShort}, {"SIEVE.__len__"}),
    "SIEVE pop returns None": (4, {"LFU": LFU, "SIEVE": SIEVEPopReturnsNone}, {"SIEVE.pop_victim"}),
    "SIEVE put resets the hand": (
        4,
        {"LFU": LFU, "SIEVE": SIEVEPutResetsHand},
        {"SIEVE.update_on_put"},
    ),
    "SIEVE pop raises its own LookupError": (
        4,
        {"LFU": LFU, "SIEVE": SIEVEPopRaisesLookupError},
        {"SIEVE.pop_victim"},
    ),
    "SIEVE sweep rotated past the hand": (
        4,
        {"LFU": LFU, "SIEVE": SIEVESweepRotated},
        {"SIEVE.pop_victim"},
    ),
    "SIEVE order trial clears the real bits": (
        4,
        {"LFU": LFU, "SIEVE": SIEVEOrderSharesBits},
        {"SIEVE.eviction_order"},
    ),
    "LFU put pushes count 0": (
        4,
        {"LFU": LFUPutPushesCountZero, "SIEVE": SIEVE},
        {"LFU.update_on_put"},
    ),
    "LFU unpin dates a pinned hit": (
        4,
        {"LFU": LFUUnpinTicksAfterPinnedHit, "SIEVE": SIEVE},
        {"LFU.update_on_hit", "LFU.update_on_unpin"},
    ),
    "LFU pin replaces the pinned set": (2, LFUPinReplacesSet, {"update_on_pin"}),
    "LFU unpin leaves the key pinned": (2, LFUUnpinKeepsPinned, {"update_on_unpin"}),
    "SIEVE unpin marks the key visited": (
        3,
        {"LFU": REMOVALS["LFU"], "SIEVE": SIEVEUnpinMarksVisited},
        {"SIEVE.update_on_unpin"},
    ),
    "SIEVE sweep evicts a visited key": (
        4,
        {"LFU": LFU, "SIEVE": SIEVESweepStaysOnVisited},
        {"SIEVE.pop_victim"},
    ),
    "LFU pop stops at a stale entry": (2, LFUPopStopsAtStale, {"pop_victim"}),
    "LFU unpin counts a use": (2, LFUUnpinCountsUse, {"update_on_unpin"}),
    "SIEVE order one short": (
        4,
        {"LFU": LFU, "SIEVE": SIEVEOrderOneShort},
        {"SIEVE.eviction_order"},
    ),
    "SIEVE order in queue order": (
        4,
        {"LFU": LFU, "SIEVE": SIEVEOrderIsQueue},
        {"SIEVE.eviction_order"},
    ),
    "SIEVE sweep wraps one key early": (
        4,
        {"LFU": LFU, "SIEVE": SIEVEWrapsOneEarly},
        {"SIEVE.pop_victim"},
    ),
    "LFU ties kept in put order": (2, LFUOrderByCountOnly, {"eviction_order"}),
    "LFU len of the heap's keys": (2, LFULenOfHeapKeys, {"__len__"}),
    "SIEVE sweep one key too far": (
        4,
        {"LFU": LFU, "SIEVE": SIEVESweepOneTooFar},
        {"SIEVE.pop_victim"},
    ),
}
