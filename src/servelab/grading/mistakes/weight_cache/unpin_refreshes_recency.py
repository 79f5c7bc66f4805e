"""unpin() moves the key to the most recent end of the order, as if it had been used."""

from servelab.grading.mistakes.weight_cache import Correct

HINT = "on unpin"
LIKE = "moves a key to the most recently used end on unpin; an unpin is not a use"


class Buggy(Correct):
    def unpin(self, key):
        left = super().unpin(key)
        self._entries.move_to_end(key)
        return left
