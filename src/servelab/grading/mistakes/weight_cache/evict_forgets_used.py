"""The eviction loop drops the victim but forgets to subtract its size from used."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "subtract"
LIKE = "forgets to subtract a victim's size from used when it evicts"


class Buggy(LearnerCache):
    def _evict(self, victim):
        self._items.pop(victim)
        self.evictions += 1
