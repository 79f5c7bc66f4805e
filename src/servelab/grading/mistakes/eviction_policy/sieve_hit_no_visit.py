"""SIEVE whose hits never set the visited bit: a FIFO."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "on a hit"
LIKE = "never sets the visited bit on a hit, so SIEVE evicts like FIFO"


class ForgetfulSIEVE(SIEVE):
    def update_on_hit(self, key):
        pass


Buggy = {"LFU": LFU, "SIEVE": ForgetfulSIEVE}
