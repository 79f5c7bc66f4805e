"""Queues any request, even one that can never fit in the pool."""

from correct import LearnerScheduler

HINT = "RequestTooLarge"


class Buggy(LearnerScheduler):
    def add(self, seq):
        self.waiting.append(seq)
