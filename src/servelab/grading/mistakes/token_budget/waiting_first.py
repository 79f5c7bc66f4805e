"""Admits waiting requests before the running ones, so a long prefill starves the decodes."""

from servelab.grading.mistakes.token_budget import Correct
from servelab.kv.budget import BudgetStep

HINT = "starve the decodes"
LIKE = (
    "admits waiting requests before scheduling the running ones, so a long prefill can "
    "starve the decodes"
)


class Buggy(Correct):
    def step(self):
        out = BudgetStep()
        self.retire(out)
        before = list(self.running)
        self.admit(out, self.max_num_batched_tokens)
        admitted = out.scheduled
        newcomers = self.running[len(before) :]
        out.scheduled = []
        self.running = before
        self.schedule_running(
            out, self.max_num_batched_tokens - sum(c.num_tokens for c in admitted)
        )
        out.num_running = len(out.scheduled)
        self.running += newcomers
        out.scheduled += admitted
        return out
