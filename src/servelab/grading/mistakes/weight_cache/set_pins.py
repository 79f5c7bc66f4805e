"""Pins kept in a set: the first replica's unpin releases a model the second still uses."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "set"
LIKE = "keeps pins in a set, so the first replica's unpin releases a model the second still uses"


class Buggy(LearnerCache):
    def pin(self, key):
        if key not in self._items:
            raise KeyError(key)
        self._pins[key] = 1

    def unpin(self, key):
        if not self._pins.get(key):
            raise ValueError(f"{key!r} is not pinned")
        self._pins[key] = 0
