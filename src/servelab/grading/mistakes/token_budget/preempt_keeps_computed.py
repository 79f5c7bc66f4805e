"""A preempted request keeps its num_computed_tokens."""

from servelab.grading.mistakes.token_budget import Correct

HINT = "reset"
LIKE = "preempts a request without a reset of its num_computed_tokens"


class Buggy(Correct):
    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)
        out.preempted.append(victim)
