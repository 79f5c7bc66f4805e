"""LFU without a FIFO tie-break: among equal counts the newest leaves first."""

from servelab.grading.mistakes.eviction_policy.correct import LFU, SIEVE

HINT = "tie-break"
LIKE = "breaks LFU ties newest first instead of with a first-in-first-out tie-break"


class NewestFirstLFU(LFU):
    def _rank(self, key):
        return (self.count[key], -self.reached[key])


Buggy = {"LFU": NewestFirstLFU, "SIEVE": SIEVE}
