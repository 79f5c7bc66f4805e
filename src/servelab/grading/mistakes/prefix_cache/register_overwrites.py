"""Registering a block whose hash is already cached points the map at the new block."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "already cached"
LIKE = "registers a block even when an equal block is already cached under its hash"


class Buggy(Correct):
    def _register(self, b, h, block_tokens):
        self.map[h] = b
        self.hash[b] = h
        self.tokens[b] = block_tokens
