"""held_bytes adds up every tier's bytes: a chunk with copies in two tiers counts twice."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "counted twice"
LIKE = "adds up every tier, so a chunk with a copy in two tiers is counted twice"


class BuggyHierarchy(Correct["Hierarchy"]):
    def held_bytes(self):
        return sum(t.used for t in self.tiers)


Buggy = {**Correct, "Hierarchy": BuggyHierarchy}
