"""Evicts exactly one entry instead of looping until the new one fits."""

from correct import LearnerCache

HINT = "loop"


class Buggy(LearnerCache):
    def _evict_until_fits(self, size):
        if self._used + size > self.capacity:
            self._evict(self._victim())
