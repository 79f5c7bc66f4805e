"""Replacing a key adds the new size without releasing the old one."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "release"
LIKE = "stores the new size of a replaced key without a release of the old one"


class Buggy(Correct):
    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            del self._entries[key]  # its old size stays in used
        while self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size
