"""get() does not refresh recency: a FIFO that calls itself an LRU."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "get"
LIKE = "does not refresh recency on get(): a FIFO that calls itself an LRU"


class Buggy(LearnerCache):
    def get(self, key):
        if key not in self._items:
            self.misses += 1
            return None
        self.hits += 1
        return self._items[key][1]
