"""A freed block that holds a hash goes to the evictable list and to the free list."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "twice"
LIKE = "puts a freed cached block both on the evictable list and on the free list: freed twice"


class Buggy(Correct):
    def _release(self, b: int) -> None:
        self.ref[b] -= 1
        if self.ref[b] == 0:
            if self.hash[b] is not None:
                self.evictable_lru[b] = None
            self.free.append(b)  # missing else: the block is freed twice
