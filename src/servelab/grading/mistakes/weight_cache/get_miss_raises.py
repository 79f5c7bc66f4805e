"""get() of an absent key raises KeyError instead of returning None."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "None"
LIKE = "raises KeyError on a miss instead of returning None"


class Buggy(Correct):
    def get(self, key):
        self._entries.move_to_end(key)
        return super().get(key)
