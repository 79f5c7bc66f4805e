"""SIEVE hand that does not wrap: after the newest key it stays at the end of the queue."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "wrap"
LIKE = "lets SIEVE's hand stop at the newest key instead of making it wrap to the oldest"


class StuckSIEVE(SIEVE):
    def update_on_remove(self, key):
        i = self.queue.index(key)
        if self.hand == key:  # past the newest it parks on the newest key instead of wrapping
            self.hand = (
                self.queue[i + 1] if i + 1 < len(self.queue) else self.queue[i - 1] if i else None
            )
        del self.queue[i]
        del self.visited[key]
        self.pinned.discard(key)


Buggy = {"LFU": LFU, "SIEVE": StuckSIEVE}
