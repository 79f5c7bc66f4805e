"""A hit moves the chunk to the most recent end under FIFO too: FIFO becomes LRU."""

from servelab.grading.mistakes.kv_offload import Correct

HINT = "FIFO"
LIKE = "refreshes a chunk on every hit under FIFO too, so FIFO behaves as LRU"


class BuggyTier(Correct["Tier"]):
    def get(self, key):
        if key not in self._sizes:
            return None
        self._sizes.move_to_end(key)
        return self._read(key)


Buggy = {**Correct, "Tier": BuggyTier}
