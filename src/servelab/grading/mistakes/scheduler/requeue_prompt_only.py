"""Forgets the generated tokens: a preempted sequence is re-prefilled at its prompt length."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import Prefill

HINT = "prompt + generated"
LIKE = "re-prefills a preempted sequence at its prompt length instead of prompt + generated"


class Buggy(Correct):
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
