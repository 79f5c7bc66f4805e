"""Queues any request, even one that can never fit in the pool."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "RequestTooLarge"
LIKE = "queues any request, even one that can never fit, instead of raising RequestTooLarge"


class Buggy(Correct):
    def add(self, seq):
        self.waiting.append(seq)
