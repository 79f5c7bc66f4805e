"""The eviction drops the victim but forgets to subtract its size from used."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "subtract"
LIKE = "forgets to subtract a victim's size from used when it evicts"


class Buggy(Correct):
    def _evict(self, key):
        self.evictions += 1
        self.evicted_bytes += self._entries[key][0]
        self._entries.pop(key)
