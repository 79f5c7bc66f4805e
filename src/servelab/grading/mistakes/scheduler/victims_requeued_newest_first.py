"""A step's victims go back to the front of waiting in the order they were preempted, so the
newest victim ends up ahead of the older one."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import StepOutput

HINT = "older victim"
LIKE = (
    "puts a step's victims back at the front of waiting newest first; the older victim must "
    "come first"
)


class Buggy(Correct):
    def step(self):
        self._victims = []
        out = StepOutput()
        self.retire(out)
        self.decode(out)
        self.waiting.extendleft(reversed(self._victims))
        self.admit(out)
        return out

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self._victims.append(victim)
        out.preempted.append(victim)
