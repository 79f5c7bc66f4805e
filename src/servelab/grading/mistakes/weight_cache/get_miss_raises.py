"""get() of an absent key raises KeyError instead of returning None."""

from servelab.grading.mistakes.weight_cache.correct import LearnerCache

HINT = "None"
LIKE = "raises KeyError on a miss instead of returning None"


class Buggy(LearnerCache):
    def get(self, key):
        self._items.move_to_end(key)
        return super().get(key)
