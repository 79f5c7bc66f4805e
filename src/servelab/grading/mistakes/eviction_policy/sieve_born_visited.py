"""SIEVE that marks a new key visited on arrival."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "new entries"
LIKE = "marks new entries visited on arrival; a key is born unvisited"


class EagerSIEVE(SIEVE):
    def update_on_put(self, key, size):
        super().update_on_put(key, size)
        self.visited[key] = True


Buggy = {"LFU": LFU, "SIEVE": EagerSIEVE}
