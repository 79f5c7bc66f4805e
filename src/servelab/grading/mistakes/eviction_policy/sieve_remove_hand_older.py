"""SIEVE whose hand moves to the next older key when the cache removes the key under it."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "next older key"
LIKE = (
    "moves SIEVE's hand to the next older key when the key under it is removed; it moves on "
    "to the next newer one"
)


class BackstepSIEVE(SIEVE):
    def update_on_remove(self, key):
        i = self.queue.index(key)
        if self.hand == key:
            self.hand = self.queue[i - 1] if i > 0 else None
        del self.queue[i]
        del self.visited[key]
        self.pinned.discard(key)


Buggy = {"LFU": LFU, "SIEVE": BackstepSIEVE}
