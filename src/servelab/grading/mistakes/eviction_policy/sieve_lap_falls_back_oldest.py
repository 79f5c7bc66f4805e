"""SIEVE that sweeps one lap at most: when every key was visited it evicts the oldest key,
not the one the hand comes back to."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE
from servelab.weights.policies import NoVictim

HINT = "full lap"
LIKE = (
    "evicts the oldest key after a full lap of visited keys instead of going on from where "
    "the hand started"
)


class OneLapSIEVE(SIEVE):
    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        n = len(self.queue)
        start = 0 if self.hand is None else self.queue.index(self.hand)
        for step in range(n):
            key = self.queue[(start + step) % n]
            if key in self.pinned:
                continue
            if self.visited[key]:
                self.visited[key] = False
                continue
            self.hand = key
            self.update_on_remove(key)
            return key
        key = next(k for k in self.queue if k not in self.pinned)  # the oldest, not the hand's
        self.hand = key
        self.update_on_remove(key)
        return key


Buggy = {"LFU": LFU, "SIEVE": OneLapSIEVE}
