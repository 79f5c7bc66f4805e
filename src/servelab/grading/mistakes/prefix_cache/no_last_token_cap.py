"""A prompt made of whole cached blocks hits all of them: nothing is left to compute."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "last prompt token"
LIKE = "lets a hit cover the whole prompt; the last prompt token must always be computed"


class Buggy(Correct):
    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens):
            b = self.map.get(h)
            if b is None or self.tokens[b] != block_tokens:
                break
            hits.append(b)
        return hits
