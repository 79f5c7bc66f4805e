"""Evicts one entry more than needed (an off-by-one in the loop condition)."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "stop evicting"
LIKE = "evicts one entry more than needed: stop evicting as soon as the new entry fits"


class Buggy(Correct):
    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size >= self.capacity and self._next_victim() is not None:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size
