"""LFU candidates ignore pins: a pinned key can be evicted."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "ignore pins"
LIKE = "lets LFU candidates ignore pins, so a pinned key can be evicted"


class PinBlindLFU(LFU):
    def update_on_pin(self, key):
        pass

    def update_on_unpin(self, key):
        pass


Buggy = {"LFU": PinBlindLFU, "SIEVE": SIEVE}
