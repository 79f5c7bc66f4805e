"""Admits while the request fits at all, ignoring the watermark."""

from correct import LearnerScheduler

HINT = "watermark"


class Buggy(LearnerScheduler):
    def fits(self, n_tokens):
        return self.bm.num_free >= self.bm.blocks_needed(n_tokens)
