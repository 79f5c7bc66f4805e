"""Re-queues a preempted sequence at the back of waiting, behind newer requests."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "front"
LIKE = "re-queues a preempted sequence at the back of waiting instead of at the front"


class Buggy(Correct):
    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.append(victim)
        out.preempted.append(victim)
