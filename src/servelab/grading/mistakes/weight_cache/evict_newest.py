"""The victim is the newest unpinned entry: an MRU, not an LRU."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "most recently used"
LIKE = "evicts the most recently used entry instead of the least recently used"


class Buggy(LearnerCache):
    def _victim(self):
        for k in reversed(self._items):
            if not self._pins.get(k):
                return k
        return None
