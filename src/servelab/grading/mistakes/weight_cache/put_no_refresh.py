"""Putting an existing key again keeps its old place in the recency order."""

from collections import OrderedDict

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "put"
LIKE = "keeps a key's old place in the recency order when it is put again"


class Buggy(LearnerCache):
    def put(self, key, value, size):
        self._check_admissible(key, size)
        if key in self._items:
            old = self._items[key][0]
            self._used -= old
            self._items = OrderedDict(
                (k, v) if k != key else (k, (size, value)) for k, v in self._items.items()
            )
            self._used += size
            self._evict_until_fits(0)
            return
        super().put(key, value, size)
