"""A count-based budget: at most four entries, whatever their sizes."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "count"
LIKE = "counts entries instead of bytes (a count-based budget of four entries)"


class Buggy(LearnerCache):
    def _evict_until_fits(self, size):
        while len(self._items) >= 4 or self._used + size > self.capacity:
            self._evict(self._victim())
