"""The victim is the largest unpinned entry, a size-aware guess that is not LRU."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "largest"
LIKE = "evicts the largest entry instead of the least recently used"


class Buggy(Correct):
    def _next_victim(self):
        unpinned = [k for k in self._entries if not self._pins.get(k)]
        return max(unpinned, key=lambda k: self._entries[k][0], default=None)
