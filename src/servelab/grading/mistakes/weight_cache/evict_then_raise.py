"""Evicts until it runs out of unpinned victims, then raises: the cache changed on error."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "before evicting"
LIKE = (
    "starts evicting and raises only when it runs out of victims; decide before evicting anything"
)


class Buggy(LearnerCache):
    def _check_admissible(self, key, size):
        if size <= 0 or size > self.capacity:
            raise ValueError(f"{key!r} cannot fit")

    def _evict_until_fits(self, size):
        while self._used + size > self.capacity:
            victim = self._victim()
            if victim is None:
                raise MemoryError(f"cannot fit: pinned {[k for k in self._pins if self._pins[k]]}")
            self._evict(victim)
