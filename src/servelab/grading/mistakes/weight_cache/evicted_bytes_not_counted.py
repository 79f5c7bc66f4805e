"""An eviction is counted, but not the bytes it frees."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "evicted_bytes"
LIKE = "counts each eviction but never adds the victim's size to evicted_bytes"


class Buggy(Correct):
    def _evict(self, key):
        self.evictions += 1
        size, _ = self._entries.pop(key)
        self._used -= size
