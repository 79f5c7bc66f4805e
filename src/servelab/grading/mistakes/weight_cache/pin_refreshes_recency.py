"""pin() moves the key to the most recent end of the order: pinning rewrites its history."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "on pin"
LIKE = "moves a key to the most recently used end on pin; pinning must not change its recency"


class Buggy(Correct):
    def pin(self, key):
        count = super().pin(key)
        self._entries.move_to_end(key)
        return count
