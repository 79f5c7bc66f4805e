"""SIEVE whose hand walks from the newest key towards the oldest."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE
from servelab.weights.policies import NoVictim

HINT = "wrong way"
LIKE = "moves SIEVE's hand the wrong way, from the newest key towards the oldest"


class BackwardSIEVE(SIEVE):
    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = len(self.queue) - 1 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i < 0:
                i = len(self.queue) - 1
            key = self.queue[i]
            if key in self.pinned:
                i -= 1
            elif self.visited[key]:
                self.visited[key] = False
                i -= 1
            else:
                j = self.queue.index(key)
                self.hand = self.queue[j - 1] if j > 0 else None
                self.queue.remove(key)
                del self.visited[key]
                return key


Buggy = {"LFU": LFU, "SIEVE": BackwardSIEVE}
