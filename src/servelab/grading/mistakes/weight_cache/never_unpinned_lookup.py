"""The last unpin leaves the entry unevictable (pinned at lookup, never released)."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import EntryTooLarge, PinnedCapacityExceeded

HINT = "evictable again"
LIKE = "never makes an entry evictable again after its last unpin"


class Buggy(Correct):
    def __init__(self, capacity_bytes):
        super().__init__(capacity_bytes)
        self._ever_pinned = set()

    def pin(self, key):
        count = super().pin(key)
        self._ever_pinned.add(key)
        return count

    def _next_victim(self):
        for key in self._entries:
            if key not in self._ever_pinned:
                return key
        return None

    def _check_can_admit(self, key, size):
        if size <= 0 or size > self.capacity:
            raise EntryTooLarge("bad size")
        held = sum(self._entries[k][0] for k in self._entries if k in self._ever_pinned)
        if size > self.capacity - held:
            raise PinnedCapacityExceeded(f"cannot fit {key!r}: pinned {sorted(self._ever_pinned)}")
