"""The chain names the partial last block too, so a half-filled block is cached and hit."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "full block"
LIKE = "hashes the partial last block too; only a full block is cached"


class Buggy(Correct):
    def _chain(self, tokens):
        chain = super()._chain(tokens)
        rest = tuple(tokens[len(chain) * self.block_size :])
        if rest:
            chain.append((hash((chain[-1][0] if chain else 0, rest)), rest))
        return chain
