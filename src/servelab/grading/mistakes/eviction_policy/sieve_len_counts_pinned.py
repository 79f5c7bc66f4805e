"""SIEVE whose len() counts pinned keys as candidates."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "SIEVE's len"
LIKE = "counts pinned keys in SIEVE's len(); only evictable keys count"


class LongSIEVE(SIEVE):
    def __len__(self):
        return len(self.queue)


Buggy = {"LFU": LFU, "SIEVE": LongSIEVE}
