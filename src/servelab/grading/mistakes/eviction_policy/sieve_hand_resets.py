"""SIEVE whose hand restarts at the oldest key on every eviction: the keys it just spared are
swept again at once, instead of the sweep resuming where it stopped."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "where it stopped"
LIKE = (
    "sends SIEVE's hand back to the oldest key after every eviction "
    "instead of leaving it where it stopped"
)


class ResettingSIEVE(SIEVE):
    def pop_victim(self):
        self.hand = None
        return super().pop_victim()


Buggy = {"LFU": LFU, "SIEVE": ResettingSIEVE}
