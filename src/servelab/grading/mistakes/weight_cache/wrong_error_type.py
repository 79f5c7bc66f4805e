"""Raises MemoryError for an entry larger than the whole cache (a permanent condition)."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "ValueError"
LIKE = "raises MemoryError instead of ValueError for an entry larger than the whole cache"


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        if isinstance(size, int) and size > self.capacity:
            raise MemoryError(f"{key!r} does not fit")
        super()._check_can_admit(key, size)
