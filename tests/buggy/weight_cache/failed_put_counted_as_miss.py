"""A failed put is counted as a miss."""

from correct import LearnerCache

HINT = "miss"


class Buggy(LearnerCache):
    def put(self, key, value, size):
        try:
            return super().put(key, value, size)
        except (ValueError, MemoryError):
            self.misses += 1
            raise
