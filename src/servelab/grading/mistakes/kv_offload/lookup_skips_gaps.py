"""lookup pins every key some tier holds, past the first missing one, not the longest prefix."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "longest prefix"
LIKE = "pins chunks after a missing one instead of only the longest prefix"


class BuggyHierarchy(Correct["Hierarchy"]):
    def lookup(self, keys):
        found = []
        for key in keys:
            where = next((i for i, t in enumerate(self.tiers) if key in t), None)
            if where is not None:
                self.tiers[where].pin(key)
                found.append((key, where))
        return found


Buggy = {**Correct, "Hierarchy": BuggyHierarchy}
