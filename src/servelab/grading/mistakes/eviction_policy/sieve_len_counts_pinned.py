"""SIEVE whose len() counts pinned keys as candidates."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE
from servelab.weights.policies import NoVictim

HINT = "SIEVE's len"
LIKE = "counts pinned keys in SIEVE's len(); only evictable keys count"


class LongSIEVE(SIEVE):
    def __len__(self):
        return len(self.queue)

    def pop_victim(self):
        if all(key in self.pinned for key in self.queue):
            raise NoVictim("every resident key is pinned")
        return super().pop_victim()


Buggy = {"LFU": LFU, "SIEVE": LongSIEVE}
