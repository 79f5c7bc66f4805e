"""An entry exactly the size of the budget is rejected (>= where > belongs)."""

from servelab.grading.mistakes.weight_cache import Correct
from servelab.weights import EntryTooLarge

HINT = "exactly"
LIKE = "rejects an entry exactly the size of the whole budget (>= where > belongs)"


class Buggy(Correct):
    def _check_can_admit(self, key, size):
        if isinstance(size, int) and size > 0 and size >= self.capacity:
            raise EntryTooLarge(f"{key!r} does not fit the cache")
        super()._check_can_admit(key, size)
