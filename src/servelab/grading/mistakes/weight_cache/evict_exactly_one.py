"""Evicts exactly one entry instead of looping until the new one fits."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "loop"
LIKE = "evicts exactly one entry per put instead of evicting in a loop until the new one fits"


class Buggy(Correct):
    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        if self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size
