"""KV bytes per token without the factor 2: only the keys are loaded."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "K and V"
LIKE = "counts the keys only, not K and V, in the KV bytes per token"


class BuggyHierarchy(Correct["Hierarchy"]):
    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv_bytes / link.bandwidth


Buggy = {**Correct, "Hierarchy": BuggyHierarchy}
