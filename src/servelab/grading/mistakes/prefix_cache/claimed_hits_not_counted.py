"""The room check forgets that a hit on an evictable block takes that block off the free
count."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "claimed"
LIKE = (
    "checks for room without subtracting the evictable blocks that its own hits claimed, so an "
    "allocate can run out of blocks halfway"
)


class Buggy(Correct):
    def _room(self, hits):
        return self.num_free  # the hits on evictable blocks are counted as free too
