"""Returns quietly (a miss) when an entry cannot be admitted."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "miss"
LIKE = "returns quietly, like a miss, when an entry cannot be admitted instead of raising"


class Buggy(LearnerCache):
    def put(self, key, value, size):
        try:
            self._check_admissible(key, size)
        except (ValueError, MemoryError):
            return None
        return super().put(key, value, size)
