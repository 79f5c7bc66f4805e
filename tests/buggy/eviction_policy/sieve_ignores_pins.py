"""SIEVE candidates ignore pins: the hand evicts a pinned key."""

from correct import LFU, SIEVE

HINT = "ignore pins"


class PinBlindSIEVE(SIEVE):
    def update_on_pin(self, key):
        pass


Buggy = {"LFU": LFU, "SIEVE": PinBlindSIEVE}
