"""LFU whose update_on_hit refreshes the tick but never adds to the count."""

from servelab.grading.mistakes.eviction_policy.correct import LFU, SIEVE

HINT = "never counts hits"
LIKE = "never counts hits: update_on_hit leaves the count at 1"


class CountlessLFU(LFU):
    def update_on_hit(self, key):
        self._touch(key)


Buggy = {"LFU": CountlessLFU, "SIEVE": SIEVE}
