"""Pins are recorded but ignored when choosing a victim."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "pinn"
LIKE = "ignores pinning when it chooses a victim"


class Buggy(LearnerCache):
    def _victim(self):
        return next(iter(self._items))

    def _check_admissible(self, key, size):
        if size <= 0 or size > self.capacity:
            raise ValueError("bad size")
