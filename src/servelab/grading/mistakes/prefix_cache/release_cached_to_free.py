"""A freed cached block goes to the plain free list with its hash and map entry kept, so the
block is reused while the map still points at it."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "plain free list"
LIKE = (
    "puts a freed cached block on the plain free list, hash and map entry kept, instead of on "
    "the evictable list"
)


class Buggy(Correct):
    def _release(self, b):
        self.ref[b] -= 1
        if self.ref[b] == 0:
            self.free.append(b)
