"""SIEVE whose hand goes back to the oldest key on every eviction (FIFO with second chance)."""

from servelab.grading.mistakes.eviction_policy.correct import LFU, SIEVE

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
