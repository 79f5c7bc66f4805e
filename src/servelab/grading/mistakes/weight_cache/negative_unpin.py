"""unpin() without a matching pin drives the count negative instead of raising."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "unpin"
LIKE = "lets an unmatched unpin() drive the pin count negative instead of raising"


class Buggy(Correct):
    def unpin(self, key):
        self._pins[key] = self._pins.get(key, 0) - 1
        return self._pins[key]
