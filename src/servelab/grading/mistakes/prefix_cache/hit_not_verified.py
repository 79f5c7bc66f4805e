"""A hit is trusted by its hash alone: the stored tokens are never compared."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "verified"
LIKE = "trusts a cached block by its hash alone; a hit must be verified against its tokens"


class Buggy(Correct):
    def _lookup(self, tokens):
        hits = []
        for h, _ in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            block = self.map.get(h)
            if block is None:
                break
            hits.append(block)
        return hits
