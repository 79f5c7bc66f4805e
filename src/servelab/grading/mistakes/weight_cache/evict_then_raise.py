"""Evicts until it runs out of unpinned victims, then raises: the cache changed on error."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import EntryPinned, EntryTooLarge, PinnedCapacityExceeded

HINT = "before evicting"
LIKE = (
    "starts evicting and raises only when it runs out of victims; decide before evicting anything"
)


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        if size <= 0 or size > self.capacity:
            raise EntryTooLarge(f"{key!r} cannot fit")
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned")

    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity:
            victim = self._next_victim()
            if victim is None:
                pinned = [k for k in self._entries if self._pins.get(k)]
                raise PinnedCapacityExceeded(f"cannot fit {key!r}: pinned {pinned}")
            self._evict(victim)
        self._entries[key] = (size, value)
        self._used += size
