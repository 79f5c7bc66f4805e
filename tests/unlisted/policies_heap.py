"""LFU slips of step 1 that leave the order right and step 2's heap wrong: a hit that pushes
no current entry, a put that takes no fresh tick, and an order that packs count and tick into
one number (right while the ticks stay small)."""

import heapq

from servelab import checkpoint

TOPIC = "eviction-policy"
COUNTS = checkpoint(TOPIC, 1)


class HitPushOnlyWhenPinned(COUNTS):
    """The push guard inverted: a hit on an unpinned key pushes no entry."""

    def update_on_hit(self, key):
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock
        if key in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))


class HitPushesOldTick(COUNTS):
    """Pushes the new count with the tick of the old one: the entry is stale at once."""

    def update_on_hit(self, key):
        self.clock += 1
        self.count[key] += 1
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.reached[key], key))
        self.reached[key] = self.clock


class PutTakesNoTick(COUNTS):
    """Only hits move the clock: keys put between two hits share a tick."""

    def update_on_put(self, key, size):
        self.count[key] = 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (1, self.clock, key))


class OrderPackedIntoOneNumber(COUNTS):
    """Sorts by `count * 100 + reached`: wrong once the clock passes 100."""

    def eviction_order(self):
        candidates = [k for k in self.count if k not in self.pinned]
        return sorted(candidates, key=lambda k: self.count[k] * 100 + self.reached[k])


MISTAKES = {
    "LFU hit pushes only when pinned": (1, HitPushOnlyWhenPinned, {"update_on_hit"}),
    "LFU hit pushes the old tick": (1, HitPushesOldTick, {"update_on_hit"}),
    "LFU put takes no tick": (1, PutTakesNoTick, {"update_on_put"}),
    "LFU order packed into one number": (1, OrderPackedIntoOneNumber, {"eviction_order"}),
}
