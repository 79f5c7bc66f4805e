"""Evicts one entry more than needed (an off-by-one in the loop condition)."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "stop evicting"
LIKE = "evicts one entry more than needed: stop evicting as soon as the new entry fits"


class Buggy(LearnerCache):
    def _evict_until_fits(self, size):
        while self._used + size >= self.capacity and self._victim() is not None:
            self._evict(self._victim())
