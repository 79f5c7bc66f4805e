"""LFU whose update_on_remove forgets the count but not the pin. No probe names this one: only
the state machine's comparison with the model finds it."""

from servelab.grading.mistakes.eviction_policy import LFU, SIEVE

HINT = "comes back pinned"
LIKE = "keeps the pin of a removed LFU key, so the key comes back pinned when it is put again"


class PinKeepingLFU(LFU):
    def update_on_remove(self, key):
        del self.count[key], self.reached[key]


Buggy = {"LFU": PinKeepingLFU, "SIEVE": SIEVE}
