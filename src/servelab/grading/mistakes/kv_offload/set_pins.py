"""Pins kept as a set: a second lookup's pin is forgotten by the first one's unpin."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "count"
LIKE = "keeps pins as a set, not a count, so one unpin releases every lookup's hold"


class BuggyTier(Correct["Tier"]):
    def pin(self, key):
        self._resident(key, "pin")
        self._pins[key] = 1
        return 1


Buggy = {**Correct, "Tier": BuggyTier}
