"""SIEVE candidates ignore pins: the hand evicts a pinned key."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "ignore pins"
LIKE = "lets the SIEVE hand ignore pins and evict a pinned key"


class PinBlindSIEVE(SIEVE):
    def update_on_pin(self, key):
        pass


Buggy = {"LFU": LFU, "SIEVE": PinBlindSIEVE}
