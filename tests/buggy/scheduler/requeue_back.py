"""Re-queues a preempted sequence at the back of waiting, behind newer requests."""

from correct import LearnerScheduler

HINT = "front"


class Buggy(LearnerScheduler):
    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.append(victim)
        out.preempted.append(victim)
