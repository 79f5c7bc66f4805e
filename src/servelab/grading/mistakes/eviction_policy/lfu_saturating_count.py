"""LFU with a count capped at 3, as a small counter would saturate."""

import heapq

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "capped"
LIKE = "keeps an LFU count that is capped (it saturates at 3 hits)"


class CappedLFU(LFU):
    def update_on_hit(self, key):
        self.clock += 1
        self.count[key] = min(self.count[key] + 1, 3)
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key], self.clock, key))


Buggy = {"LFU": CappedLFU, "SIEVE": SIEVE}
