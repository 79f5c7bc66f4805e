"""A prompt's last chunk, run as a running request, does not sample: only decodes do."""

from servelab.grading.mistakes.token_budget import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

HINT = "sample"
LIKE = "lets only decodes sample, so the last chunk of a chunked prompt samples nothing"


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
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            samples = start >= seq.prompt_len  # only a decode samples
            out.scheduled.append(Chunk(seq, start, n, slots, samples))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget
