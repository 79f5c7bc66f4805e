"""LFU without a FIFO tie-break: among equal counts the newest leaves first."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE
from servelab.weights.policies import NoVictim

HINT = "tie-break"
LIKE = "breaks LFU ties newest first instead of with a first-in-first-out tie-break"


class NewestFirstLFU(LFU):
    def pop_victim(self):
        order = self.eviction_order()
        if not order:
            raise NoVictim("every resident key is pinned")
        self.update_on_remove(order[0])
        return order[0]

    def eviction_order(self):
        candidates = [k for k in self.count if k not in self.pinned]
        return sorted(candidates, key=lambda k: (self.count[k], -self.reached[k]))


Buggy = {"LFU": NewestFirstLFU, "SIEVE": SIEVE}
