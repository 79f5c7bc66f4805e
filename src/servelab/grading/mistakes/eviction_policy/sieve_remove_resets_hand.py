"""SIEVE whose hand jumps back to the oldest key when the cache removes the key under it."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "removes the key under"
LIKE = "sends SIEVE's hand back to the oldest key when the cache removes the key under it"


class ForgetfulHandSIEVE(SIEVE):
    evicting = False

    def pop_victim(self):
        self.evicting = True
        try:
            return super().pop_victim()
        finally:
            self.evicting = False

    def update_on_remove(self, key):
        moved = self.hand == key and not self.evicting
        super().update_on_remove(key)
        if moved:  # should move on to the next newer key, like an eviction does
            self.hand = None


Buggy = {"LFU": LFU, "SIEVE": ForgetfulHandSIEVE}
