"""Each block is hashed alone, not chained over the previous block's hash."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "chain"
LIKE = "hashes each block alone: the hash does not chain over the whole prefix"


class Buggy(Correct):
    def _chain(self, tokens):
        out = []
        for i in range(len(tokens) // self.block_size):
            block = tuple(tokens[i * self.block_size : (i + 1) * self.block_size])
            out.append((hash(block), block))
        return out
