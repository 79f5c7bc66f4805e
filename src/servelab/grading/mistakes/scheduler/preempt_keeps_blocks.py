"""A preempted sequence is re-queued but keeps its blocks."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "give back"
LIKE = "re-queues a preempted sequence without making it give back its blocks"


class Buggy(Correct):
    def preempt(self, victim, out):
        self.waiting.appendleft(victim)
        out.preempted.append(victim)
