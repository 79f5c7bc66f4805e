"""Lets a small request overtake a large one that does not fit yet: not first come, first
served."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import Prefill

HINT = "first come"
LIKE = "lets a small request overtake one that does not fit yet: not first come, first served"


class Buggy(Correct):
    def admit(self, out):
        for seq in list(self.waiting):
            n = seq.num_tokens
            if not self.fits(n):
                continue
            self.waiting.remove(seq)
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))
