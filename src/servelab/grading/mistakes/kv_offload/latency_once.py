"""The load pays the link's latency once, as if every chunk came in one request."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "per chunk"
LIKE = "pays the link's latency once in all instead of once per chunk request"


class BuggyHierarchy(Correct["Hierarchy"]):
    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        return link.latency_s + tokens * kv_bytes / link.bandwidth


Buggy = {**Correct, "Hierarchy": BuggyHierarchy}
