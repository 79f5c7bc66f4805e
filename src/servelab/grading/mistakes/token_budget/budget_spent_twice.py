"""Takes a running request's tokens from the budget twice."""

from servelab.grading.mistakes.token_budget import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

HINT = "twice"
LIKE = "takes a running request's tokens from the budget twice"


class Buggy(Correct):
    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
                budget -= n
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return max(budget, 0)
