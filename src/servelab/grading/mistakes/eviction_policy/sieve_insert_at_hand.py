"""SIEVE that inserts a new key just behind the hand, as CLOCK does, instead of at the newest
end of the queue."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "CLOCK"
LIKE = "inserts a new key at the hand, like CLOCK, instead of at the newest end of SIEVE's queue"


class ClockSIEVE(SIEVE):
    def update_on_put(self, key, size):
        if self.hand is None:
            self.queue.append(key)
        else:
            self.queue.insert(self.queue.index(self.hand), key)
        self.visited[key] = False


Buggy = {"LFU": LFU, "SIEVE": ClockSIEVE}
