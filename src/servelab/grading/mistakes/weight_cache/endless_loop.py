"""When every resident entry is pinned, the eviction loop spins forever."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "never returned"
LIKE = "loops forever looking for a victim when every entry is pinned: a call that never returned"


class Buggy(LearnerCache):
    def _check_admissible(self, key, size):
        if size <= 0 or size > self.capacity:
            raise ValueError(f"{key!r} cannot fit")

    def _evict_until_fits(self, size):
        while self._used + size > self.capacity:
            victim = self._victim()
            if victim is None:
                continue  # waits for an unpin that can never come
            self._evict(victim)
