"""A count-based budget: at most four entries, whatever their sizes."""

from correct import LearnerCache

HINT = "count"


class Buggy(LearnerCache):
    def _evict_until_fits(self, size):
        while len(self._items) >= 4 or self._used + size > self.capacity:
            self._evict(self._victim())
