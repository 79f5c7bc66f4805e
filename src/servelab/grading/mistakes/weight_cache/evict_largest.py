"""The victim is the largest unpinned entry, a size-aware guess that is not LRU."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "largest"
LIKE = "evicts the largest entry instead of the least recently used"


class Buggy(LearnerCache):
    def _victim(self):
        unpinned = [k for k in self._items if not self._pins.get(k)]
        return max(unpinned, key=lambda k: self._items[k][0], default=None)
