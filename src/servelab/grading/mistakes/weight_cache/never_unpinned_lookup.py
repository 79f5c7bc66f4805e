"""The last unpin leaves the entry unevictable (pinned at lookup, never released)."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "evictable again"
LIKE = "never makes an entry evictable again after its last unpin"


class Buggy(LearnerCache):
    def __init__(self, capacity_bytes):
        super().__init__(capacity_bytes)
        self._ever_pinned = set()

    def pin(self, key):
        super().pin(key)
        self._ever_pinned.add(key)

    def _victim(self):
        for k in self._items:
            if k not in self._ever_pinned:
                return k
        return None

    def _check_admissible(self, key, size):
        if size <= 0 or size > self.capacity:
            raise ValueError("bad size")
        unpinned = sum(s for k, (s, _) in self._items.items() if k not in self._ever_pinned)
        if size > self.capacity - self._used + unpinned:
            raise MemoryError(f"cannot fit {key!r}: pinned {sorted(self._ever_pinned)}")
