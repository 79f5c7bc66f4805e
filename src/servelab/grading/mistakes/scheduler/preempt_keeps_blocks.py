"""A preempted sequence is re-queued but keeps its blocks."""

from servelab.grading.mistakes.scheduler.correct import LearnerScheduler

HINT = "give back"
LIKE = "re-queues a preempted sequence without making it give back its blocks"


class Buggy(LearnerScheduler):
    def preempt(self, victim, out):
        self.waiting.appendleft(victim)
        out.preempted.append(victim)
