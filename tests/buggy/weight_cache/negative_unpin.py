"""unpin() without a matching pin drives the count negative instead of raising."""

from correct import LearnerCache

HINT = "unpin"


class Buggy(LearnerCache):
    def unpin(self, key):
        self._pins[key] = self._pins.get(key, 0) - 1
