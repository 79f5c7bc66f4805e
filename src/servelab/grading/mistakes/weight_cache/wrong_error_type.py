"""Raises MemoryError for an entry larger than the whole cache (a permanent condition)."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "ValueError"
LIKE = "raises MemoryError instead of ValueError for an entry larger than the whole cache"


class Buggy(LearnerCache):
    def _check_admissible(self, key, size):
        if size > self.capacity:
            raise MemoryError(f"{key!r} does not fit")
        super()._check_admissible(key, size)
