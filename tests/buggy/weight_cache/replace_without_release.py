"""Replacing a key adds the new size without releasing the old one."""

from correct import LearnerCache

HINT = "release"


class Buggy(LearnerCache):
    def _release_old(self, key):
        if key in self._items:
            del self._items[key]
