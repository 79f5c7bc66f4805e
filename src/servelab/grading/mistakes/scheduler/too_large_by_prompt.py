"""add() sizes a request by its prompt alone, forgetting the tokens it will generate."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import RequestTooLarge

HINT = "max_new_tokens"
LIKE = "sizes a request by its prompt alone in add(); it needs prompt_len + max_new_tokens"


class Buggy(Correct):
    def add(self, seq):
        need = self.bm.blocks_needed(seq.prompt_len)
        if need > self.bm.num_blocks - self.watermark:
            raise RequestTooLarge(f"sequence {seq.seq_id} needs {need} blocks")
        self.waiting.append(seq)
