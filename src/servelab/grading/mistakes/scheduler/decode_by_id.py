"""Decodes the running sequences in order of their ids instead of their order of arrival."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "order of their ids"
LIKE = "decodes running sequences in order of their ids instead of oldest first"


class Buggy(Correct):
    def decode(self, out):
        self.running.sort(key=lambda s: s.seq_id)
        super().decode(out)
