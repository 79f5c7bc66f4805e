"""store drops what the CPU tier evicts instead of writing it into the disk tier."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "cascade"
LIKE = "drops what the CPU tier evicts instead of letting it cascade down to disk"


class BuggyHierarchy(Correct["Hierarchy"]):
    def store(self, key, payload):
        return self.tiers[0].put(key, payload) is not None


Buggy = {**Correct, "Hierarchy": BuggyHierarchy}
