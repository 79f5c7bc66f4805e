"""A hit on an evictable block leaves it on the evictable list, so it can be reclaimed while in
use."""

from collections import OrderedDict

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "evictable list"
LIKE = "leaves a hit block on the evictable list while a sequence uses it"


class Buggy(Correct):
    def allocate(self, seq, token_ids):
        saved = OrderedDict(self.evictable_lru)
        cached = super().allocate(seq, token_ids)
        self.evictable_lru = OrderedDict(
            (b, None)
            for b in [*saved, *self.evictable_lru]
            if b in saved or b in self.evictable_lru
        )
        return cached
