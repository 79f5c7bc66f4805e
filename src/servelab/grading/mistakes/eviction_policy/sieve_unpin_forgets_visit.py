"""SIEVE that forgets a key's visited bit when the key is unpinned."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "history"
LIKE = "forgets a key's SIEVE history (its visited bit) when the key is unpinned"


class ForgetfulSIEVE(SIEVE):
    def update_on_unpin(self, key):
        super().update_on_unpin(key)
        self.visited[key] = False


Buggy = {"LFU": LFU, "SIEVE": ForgetfulSIEVE}
