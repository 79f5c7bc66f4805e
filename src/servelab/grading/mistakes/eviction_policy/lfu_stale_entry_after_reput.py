"""LFU whose pop_victim trusts a heap entry whose count matches, so a key removed and put
again is evicted through a stale entry from its earlier life."""

import heapq

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE
from servelab.weights.policies import NoVictim

HINT = "stale heap entry"
LIKE = (
    "accepts a stale heap entry whose count matches: a key removed and put again is evicted "
    "at the place of its earlier life"
)


class StaleLFU(LFU):
    def pop_victim(self):
        while self.heap:
            count, _reached, key = heapq.heappop(self.heap)
            if key not in self.pinned and self.count.get(key) == count:  # `reached` unchecked
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")


Buggy = {"LFU": StaleLFU, "SIEVE": SIEVE}
