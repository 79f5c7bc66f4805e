"""A hit on an evictable block leaves it on the evictable list, so it can be reclaimed while in
use."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "evictable list"
LIKE = "leaves a hit block on the evictable list while a sequence uses it"


class Buggy(Correct):
    def _claim(self, block):
        self.ref[block] += 1  # stays in evictable_lru even at refcount 0
