"""LFU whose update_on_unpin does not push the key back onto the heap."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "back onto the heap"
LIKE = "does not push an unpinned key back onto the heap, so pop_victim can no longer find it"


class LostLFU(LFU):
    def update_on_unpin(self, key):
        self.pinned.discard(key)


Buggy = {"LFU": LostLFU, "SIEVE": SIEVE}
