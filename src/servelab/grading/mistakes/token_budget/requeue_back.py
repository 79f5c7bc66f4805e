"""Puts a preempted request at the back of waiting, behind requests that came later."""

from servelab.grading.mistakes.token_budget import Correct

HINT = "front"
LIKE = "re-queues a preempted request at the back of waiting, not the front"


class Buggy(Correct):
    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.append(victim)
        out.preempted.append(victim)
