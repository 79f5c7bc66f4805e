"""LFU whose update_on_hit refreshes the tick but never adds to the count."""

import heapq

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "never counts hits"
LIKE = "never counts hits: update_on_hit leaves the count at 1"


class CountlessLFU(LFU):
    def update_on_hit(self, key):
        self.clock += 1
        self.reached[key] = self.clock  # the count stays where it was
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))


Buggy = {"LFU": CountlessLFU, "SIEVE": SIEVE}
