"""The MemoryError says the cache is full, but not which keys are pinned."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import PinnedCapacityExceeded

HINT = "pinned keys"
LIKE = "raises a MemoryError that does not name the pinned keys"


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        try:
            super()._check_can_admit(key, size)
        except PinnedCapacityExceeded:
            raise PinnedCapacityExceeded("cannot admit: too much of the cache is pinned") from None
