"""The victim is the newest unpinned entry: an MRU, not an LRU."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "most recently used"
LIKE = "evicts the most recently used entry instead of the least recently used"


class Buggy(Correct):
    def _next_victim(self):
        for key in reversed(self._entries):
            if not self._pins.get(key):
                return key
        return None
