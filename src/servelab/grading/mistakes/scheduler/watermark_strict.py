"""Admission stops one block early: it wants more than the watermark free, not at least."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "exactly the watermark"
LIKE = "refuses an admission that leaves exactly the watermark free (> where >= belongs)"


class Buggy(Correct):
    def fits(self, n_tokens):
        return self.bm.num_free - self.bm.blocks_needed(n_tokens) > self.watermark
