"""Evicting a cached block clears the block but leaves its entry in the hash map."""

from servelab.grading.mistakes.prefix_cache.correct import PrefixBlockManager

HINT = "map"
LIKE = "clears an evicted block but leaves its entry in the hash map"


class Buggy(PrefixBlockManager):
    def _evict(self, b: int) -> None:
        self.hash[b] = None  # forgets: del self.map[old hash]
        self.tokens[b] = None
