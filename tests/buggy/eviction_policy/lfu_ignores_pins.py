"""LFU candidates ignore pins: a pinned key can be evicted."""

from correct import LFU, SIEVE

HINT = "ignore pins"


class PinBlindLFU(LFU):
    def update_on_pin(self, key):
        pass

    def update_on_unpin(self, key):
        pass


Buggy = {"LFU": PinBlindLFU, "SIEVE": SIEVE}
