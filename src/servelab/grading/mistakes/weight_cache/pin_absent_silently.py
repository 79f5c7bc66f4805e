"""pin() of a key that is not resident records a pin instead of raising KeyError."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "KeyError"
LIKE = "records a pin for a key that is not resident instead of raising KeyError"


class Buggy(LearnerCache):
    def pin(self, key):
        self._pins[key] = self._pins.get(key, 0) + 1
