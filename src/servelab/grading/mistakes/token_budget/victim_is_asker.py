"""Preempts the request whose blocks did not fit, not the latest running one."""

from servelab.grading.mistakes.token_budget import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

HINT = "latest running"
LIKE = "preempts the request whose new blocks did not fit instead of the latest running one"


class Buggy(Correct):
    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                self.running.remove(seq)
                self.preempt(seq, out)
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget
