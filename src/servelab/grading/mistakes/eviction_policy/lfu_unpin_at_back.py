"""LFU forgets history across a pin: an unpinned key restarts at count 1."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "history"
LIKE = "forgets a key's LFU history across a pin: an unpinned key restarts at count 1"


class ForgetfulLFU(LFU):
    def update_on_unpin(self, key):
        self.count[key] = 1
        self.clock += 1
        self.reached[key] = self.clock
        super().update_on_unpin(key)


Buggy = {"LFU": ForgetfulLFU, "SIEVE": SIEVE}
