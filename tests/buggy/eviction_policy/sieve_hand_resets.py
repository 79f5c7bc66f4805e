"""SIEVE whose hand goes back to the oldest key on every eviction (FIFO with second chance)."""

from correct import LFU, SIEVE

HINT = "stays where it stopped"


class ResettingSIEVE(SIEVE):
    def pop_victim(self):
        self.hand = None
        return super().pop_victim()


Buggy = {"LFU": LFU, "SIEVE": ResettingSIEVE}
