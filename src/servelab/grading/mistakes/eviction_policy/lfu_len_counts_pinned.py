"""LFU whose len() counts pinned keys as candidates."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "LFU's len"
LIKE = "counts pinned keys in LFU's len(); only evictable keys count"


class LongLFU(LFU):
    def __len__(self):
        return len(self.count)


Buggy = {"LFU": LongLFU, "SIEVE": SIEVE}
