"""Returns quietly (a miss) when an entry cannot be admitted."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "miss"
LIKE = "returns quietly, like a miss, when an entry cannot be admitted instead of raising"


class Buggy(Correct):
    def put(self, key, value, size):
        try:
            self._check_can_admit(key, size)
        except (ValueError, MemoryError):
            return None
        return super().put(key, value, size)
