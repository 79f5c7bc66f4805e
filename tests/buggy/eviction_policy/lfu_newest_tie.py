"""LFU without a FIFO tie-break: among equal counts the newest leaves first."""

from correct import LFU, SIEVE

HINT = "tie-break"


class NewestFirstLFU(LFU):
    def _rank(self, key):
        return (self.count[key], -self.reached[key])


Buggy = {"LFU": NewestFirstLFU, "SIEVE": SIEVE}
