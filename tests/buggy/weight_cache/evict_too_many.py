"""Evicts one entry more than needed (an off-by-one in the loop condition)."""

from correct import LearnerCache

HINT = "stop evicting"


class Buggy(LearnerCache):
    def _evict_until_fits(self, size):
        while self._used + size >= self.capacity and self._victim() is not None:
            self._evict(self._victim())
