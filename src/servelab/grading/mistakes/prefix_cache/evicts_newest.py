"""Reclaims the most recently freed cached block instead of the least recently freed."""

from servelab.grading.mistakes.prefix_cache import Correct
from servelab.kv.blocks import OutOfBlocks

HINT = "least recently"
LIKE = "reclaims the most recently freed cached block instead of the least recently freed"


class Buggy(Correct):
    def _alloc(self) -> int:
        if self.free:
            b = self.free.popleft()
        elif self.evictable_lru:
            b, _ = self.evictable_lru.popitem(last=True)
            self._forget(b)
        else:
            raise OutOfBlocks("no free block")
        self.ref[b] = 1
        return b
