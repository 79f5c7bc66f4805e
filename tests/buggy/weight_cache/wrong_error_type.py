"""Raises MemoryError for an entry larger than the whole cache (a permanent condition)."""

from correct import LearnerCache

HINT = "ValueError"


class Buggy(LearnerCache):
    def _check_admissible(self, key, size):
        if size > self.capacity:
            raise MemoryError(f"{key!r} does not fit")
        super()._check_admissible(key, size)
