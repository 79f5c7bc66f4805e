"""Pins kept in a set: the first replica's unpin releases a model the second still uses."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "set"
LIKE = "keeps pins in a set, so the first replica's unpin releases a model the second still uses"


class Buggy(Correct):
    def pin(self, key):
        if key not in self._entries:
            raise KeyError(f"cannot pin {key!r}: it is not in the cache")
        self._pins[key] = 1
        return 1

    def unpin(self, key):
        if not self._pins.get(key):
            raise ValueError(f"{key!r} is not pinned")
        del self._pins[key]
        return 0
