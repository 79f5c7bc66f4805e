"""Pins are recorded but ignored when choosing a victim."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import EntryTooLarge

HINT = "pinn"
LIKE = "ignores pinning when it chooses a victim"


class Buggy(Correct):
    def _next_victim(self):
        return next(iter(self._entries))

    def _check_can_admit(self, key, size):
        if size <= 0 or size > self.capacity:
            raise EntryTooLarge("bad size")
