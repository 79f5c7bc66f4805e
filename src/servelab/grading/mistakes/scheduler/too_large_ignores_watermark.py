"""add() compares a request with the whole pool, forgetting the watermark."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import RequestTooLarge

HINT = "num_blocks - watermark"
LIKE = "rejects only requests larger than the whole pool; the limit is num_blocks - watermark"


class Buggy(Correct):
    def add(self, seq):
        need = self.bm.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        if need > self.bm.num_blocks:
            raise RequestTooLarge(f"sequence {seq.seq_id} needs {need} blocks")
        self.waiting.append(seq)
