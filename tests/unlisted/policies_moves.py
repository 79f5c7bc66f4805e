"""Eviction-policy slips that only a later read shows: a SIEVE pin that moves its key to the
newest end, an unpin that moves it to the oldest, an LFU tick that wraps at 1000 and a hit
that takes no fresh tick."""

import heapq

from servelab import checkpoint

TOPIC = "eviction-policy"
COUNTS = checkpoint(TOPIC, 1)
ALONE = checkpoint(TOPIC, 2)
REMOVALS = checkpoint(TOPIC, 3)


class SIEVEPinToNewest(REMOVALS["SIEVE"]):
    """A pin moves the key to the newest end of the queue."""

    def update_on_pin(self, key):
        self.pinned.add(key)
        self.queue.remove(key)
        self.queue.append(key)


class SIEVEUnpinToOldest(REMOVALS["SIEVE"]):
    """An unpin puts the key back at the oldest end."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.queue.remove(key)
        self.queue.insert(0, key)


class LFUTickWrapsAt1000(ALONE):
    """The clock is kept modulo 1000."""

    def update_on_put(self, key, size):
        self.clock = (self.clock + 1) % 1000
        self.count[key] = 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (1, self.clock, key))

    def update_on_hit(self, key):
        self.clock = (self.clock + 1) % 1000
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))


class LFUHitOnSameTick(COUNTS):
    """A hit records the current tick without advancing the clock."""

    def update_on_hit(self, key):
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))


MISTAKES = {
    "SIEVE pin moves the key to the newest end": (
        3,
        {**REMOVALS, "SIEVE": SIEVEPinToNewest},
        {"SIEVE.update_on_pin"},
    ),
    "SIEVE unpin moves the key to the oldest end": (
        3,
        {**REMOVALS, "SIEVE": SIEVEUnpinToOldest},
        {"SIEVE.update_on_unpin"},
    ),
    "LFU tick wraps at 1000": (2, LFUTickWrapsAt1000, {"update_on_put"}),
    "LFU hit takes no fresh tick": (1, LFUHitOnSameTick, {"update_on_hit"}),
}
