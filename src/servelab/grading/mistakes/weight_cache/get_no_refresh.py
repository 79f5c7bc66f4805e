"""get() does not refresh recency: a FIFO that calls itself an LRU."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "get"
LIKE = "does not refresh recency on get(): a FIFO that calls itself an LRU"


class Buggy(Correct):
    def get(self, key):
        if key not in self._entries:
            self.misses += 1
            return None
        self.hits += 1
        return self._entries[key][1]
