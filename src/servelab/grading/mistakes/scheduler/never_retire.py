"""Finished sequences are never retired: they keep running and decoding."""

from servelab.grading.mistakes.scheduler.correct import LearnerScheduler

HINT = "never retires"
LIKE = "never retires finished sequences: they stay running"


class Buggy(LearnerScheduler):
    def retire(self, out):
        pass
