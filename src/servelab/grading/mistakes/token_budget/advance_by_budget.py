"""Advances num_computed_tokens by the budget left rather than by the tokens scheduled."""

from servelab.grading.mistakes.token_budget import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

HINT = "by the budget"
LIKE = "advances num_computed_tokens by the budget left instead of by the tokens that ran"


class Buggy(Correct):
    def admit(self, out, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + budget
            budget -= n
