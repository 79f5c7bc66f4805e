"""When every resident entry is pinned, the eviction loop spins forever."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import EntryTooLarge

HINT = "never returned"
LIKE = "loops forever looking for a victim when every entry is pinned: a call that never returned"


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        if size <= 0 or size > self.capacity:
            raise EntryTooLarge(f"{key!r} cannot fit")

    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity:
            victim = self._next_victim()
            if victim is None:
                continue  # waits for an unpin that can never come
            self._evict(victim)
        self._entries[key] = (size, value)
        self._used += size
