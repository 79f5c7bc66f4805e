"""The MemoryError says the cache is full, but not which keys are pinned."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "pinned keys"
LIKE = "raises a MemoryError that does not name the pinned keys"


class Buggy(LearnerCache):
    def _check_admissible(self, key, size):
        try:
            super()._check_admissible(key, size)
        except MemoryError:
            raise MemoryError("cannot admit: too much of the cache is pinned") from None
