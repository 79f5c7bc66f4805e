"""LFU that drops hits on pinned keys: a key comes back from a pin with a stale count."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "while pinned"
LIKE = "ignores hits taken while pinned: they must count"


class PinBlindLFU(LFU):
    def update_on_hit(self, key):
        if key not in self.pinned:
            super().update_on_hit(key)


Buggy = {"LFU": PinBlindLFU, "SIEVE": SIEVE}
