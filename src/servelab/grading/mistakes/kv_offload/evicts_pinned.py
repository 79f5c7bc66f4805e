"""can_evict looks only at references, so a chunk a lookup pinned is evicted before its
retrieve (LMCache's rule is: not pinned and ref_count == 1)."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "pinned"
LIKE = "evicts a chunk that a lookup pinned before its retrieve completes"


class BuggyTier(Correct["Tier"]):
    def can_evict(self, key):
        return self.ref_count(key) == 1


Buggy = {**Correct, "Tier": BuggyTier}
