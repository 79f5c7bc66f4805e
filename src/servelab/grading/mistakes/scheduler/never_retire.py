"""Finished sequences are never retired: they keep running and decoding."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "never retires"
LIKE = "never retires finished sequences: they stay running"


class Buggy(Correct):
    def retire(self, out):
        pass
