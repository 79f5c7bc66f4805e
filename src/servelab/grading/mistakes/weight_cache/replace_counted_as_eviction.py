"""Replacing a key releases the old entry through _evict, so a replacement counts as an
eviction."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "replacement"
LIKE = "counts the release of a replaced key as an eviction; a replacement evicts nothing"


class Buggy(Correct):
    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            self._evict(key)  # counted in evictions and evicted_bytes
        while self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size
