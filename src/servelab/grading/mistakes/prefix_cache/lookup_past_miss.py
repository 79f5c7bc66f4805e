"""The lookup skips a missing block and goes on matching the ones after it."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "first miss"
LIKE = "goes on matching after a missing block instead of stopping at the first miss"


class Buggy(Correct):
    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            b = self.map.get(h)
            if b is None or self.tokens[b] != block_tokens:
                continue
            hits.append(b)
        return hits
