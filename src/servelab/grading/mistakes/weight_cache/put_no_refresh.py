"""Putting an existing key again keeps its old place in the recency order."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "put"
LIKE = "keeps a key's old place in the recency order when it is put again"


class Buggy(Correct):
    def put(self, key, value, size):
        self._check_can_admit(key, size)
        if key in self._entries:
            self._used -= self._entries[key][0]
            self._entries[key] = (size, value)  # stays where it was
            self._used += size
            while self._used > self.capacity:
                self._evict(self._next_victim())
            return
        while self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size
