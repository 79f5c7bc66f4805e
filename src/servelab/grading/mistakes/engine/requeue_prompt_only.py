"""Re-prefills a preempted sequence at its prompt length, dropping the tokens it generated."""

from servelab.grading.mistakes.engine import Correct, Scheduler
from servelab.kv.scheduler import Prefill

HINT = "prompt + generated"
LIKE = "re-prefills a preempted sequence at its prompt length instead of prompt + generated"


class PromptOnly(Scheduler):
    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            n = seq.prompt_len
            if not self.fits(n):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class Buggy(Correct):
    scheduler_class = PromptOnly
