"""pin() of a key that is not resident records a pin instead of raising KeyError."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "KeyError"
LIKE = "records a pin for a key that is not resident instead of raising KeyError"


class Buggy(Correct):
    def pin(self, key):
        self._pins[key] = self._pins.get(key, 0) + 1
        return self._pins[key]
