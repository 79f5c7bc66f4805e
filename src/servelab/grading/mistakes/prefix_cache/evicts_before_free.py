"""Reclaims cached blocks while plain free blocks are still available."""

from servelab.grading.mistakes.prefix_cache import Correct
from servelab.kv.blocks import OutOfBlocks

HINT = "plain free"
LIKE = "reclaims cached blocks while plain free blocks are still left"


class Buggy(Correct):
    def _alloc(self) -> int:
        if self.evictable_lru:
            b, _ = self.evictable_lru.popitem(last=False)
            self._forget(b)
        elif self.free:
            b = self.free.popleft()
        else:
            raise OutOfBlocks("no free block")
        self.ref[b] = 1
        return b
