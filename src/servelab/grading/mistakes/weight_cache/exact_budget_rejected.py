"""An entry exactly the size of the budget is rejected (>= where > belongs)."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "exactly"
LIKE = "rejects an entry exactly the size of the whole budget (>= where > belongs)"


class Buggy(LearnerCache):
    def _check_admissible(self, key, size):
        if size >= self.capacity and size > 0:
            raise ValueError(f"{key!r} does not fit the cache")
        super()._check_admissible(key, size)
