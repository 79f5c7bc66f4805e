"""SIEVE that does not clear the visited bit as the hand passes."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE
from servelab.weights.policies import NoVictim

HINT = "visited bit"
LIKE = "never clears a key's visited bit as SIEVE's hand passes it"


class StickySIEVE(SIEVE):
    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        start = 0 if self.hand is None else self.queue.index(self.hand)
        n = len(self.queue)
        for step in range(n):
            key = self.queue[(start + step) % n]
            if key not in self.pinned and not self.visited[key]:
                self.hand = key
                self.update_on_remove(key)
                return key
        key = next(k for k in self.queue if k not in self.pinned)  # all visited: oldest
        self.hand = key
        self.update_on_remove(key)
        return key


Buggy = {"LFU": LFU, "SIEVE": StickySIEVE}
