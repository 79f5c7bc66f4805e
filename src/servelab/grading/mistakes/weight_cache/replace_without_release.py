"""Replacing a key adds the new size without releasing the old one."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "release"
LIKE = "stores the new size of a replaced key without a release of the old one"


class Buggy(LearnerCache):
    def _release_old(self, key):
        if key in self._items:
            del self._items[key]
