"""A count-based budget: at most four entries, whatever their sizes."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "count"
LIKE = "counts entries instead of bytes (a count-based budget of four entries)"


class Buggy(Correct):
    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while len(self._entries) >= 4 or self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size
