"""A sequence is retired one step before its last token is generated."""

from servelab.grading.mistakes.scheduler import Correct

HINT = "a step early"
LIKE = "retires a sequence a step early, before its last token is generated"


class Buggy(Correct):
    def retire(self, out):
        still_running = []
        for seq in self.running:
            if seq.num_generated >= seq.max_new_tokens - 1:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            else:
                still_running.append(seq)
        self.running = still_running
