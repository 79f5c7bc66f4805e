"""LFU whose unpin refreshes the key's tick, moving it behind keys of equal count."""

import heapq

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "unpin"
LIKE = (
    "moves a key behind its equals on unpin: update_on_unpin refreshes its place among equal counts"
)


class RefreshingLFU(LFU):
    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.clock += 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (self.count[key], self.clock, key))


Buggy = {"LFU": RefreshingLFU, "SIEVE": SIEVE}
