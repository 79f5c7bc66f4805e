"""Evicting a cached block clears the block but leaves its entry in the hash map."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "map"
LIKE = "clears an evicted block but leaves its entry in the hash map"


class Buggy(Correct):
    def _forget(self, b: int) -> None:
        self.hash[b] = None  # forgets: del self.map[old hash]
        self.tokens[b] = None
