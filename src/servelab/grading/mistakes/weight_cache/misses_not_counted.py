"""get() counts hits but never misses."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "never counts misses"
LIKE = "never counts misses: get() of an absent key leaves misses unchanged"


class Buggy(Correct):
    def get(self, key):
        if key in self._entries:
            self.hits += 1
            self._entries.move_to_end(key)
            return self._entries[key][1]
        return None
