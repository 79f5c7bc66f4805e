"""A failed put is counted as a miss."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "miss"
LIKE = "counts a failed put as a miss"


class Buggy(Correct):
    def put(self, key, value, size):
        try:
            return super().put(key, value, size)
        except (ValueError, MemoryError):
            self.misses += 1
            raise
