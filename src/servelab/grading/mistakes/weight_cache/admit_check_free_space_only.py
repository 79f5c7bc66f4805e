"""The admission check compares the size with the free bytes alone, as if unpinned entries
could not be evicted to make room."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import PinnedCapacityExceeded

HINT = "evicting unpinned"
LIKE = (
    "refuses an entry that fits after evicting unpinned entries: it compares the size with the "
    "free bytes only when some entry is pinned"
)


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        super()._check_can_admit(key, size)
        pinned = [k for k in self._entries if self._pins.get(k)]
        if pinned and size > self.capacity - self._used:
            raise PinnedCapacityExceeded(f"cannot admit {key!r}: pinned {pinned}")
