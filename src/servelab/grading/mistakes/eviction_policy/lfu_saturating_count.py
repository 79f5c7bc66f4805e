"""LFU with a count capped at 3, as a small counter would saturate."""

from servelab.grading.mistakes.eviction_policy.correct import LFU, SIEVE

HINT = "capped"
LIKE = "keeps an LFU count that is capped (it saturates at 3 hits)"


class CappedLFU(LFU):
    def update_on_hit(self, key):
        self.count[key] = min(self.count[key] + 1, 3)
        self._touch(key)


Buggy = {"LFU": CappedLFU, "SIEVE": SIEVE}
