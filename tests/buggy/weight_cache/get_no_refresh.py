"""get() does not refresh recency: a FIFO that calls itself an LRU."""

from correct import LearnerCache

HINT = "get"


class Buggy(LearnerCache):
    def get(self, key):
        if key not in self._items:
            self.misses += 1
            return None
        self.hits += 1
        return self._items[key][1]
