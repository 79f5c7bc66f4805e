"""LFU that breaks ties between equal counts by the key itself, not by age."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE
from servelab.weights.policies import NoVictim

HINT = "by key"
LIKE = "breaks LFU ties by key instead of first in, first out"


class KeyedLFU(LFU):
    def pop_victim(self):
        order = self.eviction_order()
        if not order:
            raise NoVictim("every resident key is pinned")
        self.update_on_remove(order[0])
        return order[0]

    def eviction_order(self):
        candidates = [k for k in self.count if k not in self.pinned]
        return sorted(candidates, key=lambda k: (self.count[k], k))


Buggy = {"LFU": KeyedLFU, "SIEVE": SIEVE}
