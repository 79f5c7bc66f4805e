"""Admits while the request fits at all, ignoring the watermark."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "watermark"
LIKE = "admits while a request fits at all, ignoring the watermark"


class Buggy(Correct):
    def fits(self, n_tokens):
        return self.bm.num_free >= self.bm.blocks_needed(n_tokens)
