"""can_evict looks only at pins, so a chunk a GPU transfer still reads is freed."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "referenced"
LIKE = "evicts or frees a chunk still referenced by a GPU transfer"


class BuggyTier(Correct["Tier"]):
    def can_evict(self, key):
        return self.pin_count(key) == 0


Buggy = {**Correct, "Tier": BuggyTier}
