"""The recompute time counts 2 FLOPs per parameter per token and forgets attention."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "attention"
LIKE = "leaves the attention term out of the recompute time"


class BuggyHierarchy(Correct["Hierarchy"]):
    def recompute_seconds(self, tokens):
        return 2 * self.model.params * tokens / self.flops


Buggy = {**Correct, "Hierarchy": BuggyHierarchy}
