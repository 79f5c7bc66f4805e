"""Evicts exactly one entry instead of looping until the new one fits."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "loop"
LIKE = "evicts exactly one entry per put instead of evicting in a loop until the new one fits"


class Buggy(LearnerCache):
    def _evict_until_fits(self, size):
        if self._used + size > self.capacity:
            self._evict(self._victim())
