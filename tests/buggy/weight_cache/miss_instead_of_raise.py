"""Returns quietly (a miss) when an entry cannot be admitted."""

from correct import LearnerCache

HINT = "miss"


class Buggy(LearnerCache):
    def put(self, key, value, size):
        try:
            self._check_admissible(key, size)
        except (ValueError, MemoryError):
            return None
        return super().put(key, value, size)
