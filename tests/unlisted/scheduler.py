"""Scheduler slips, each on the notebook's own classes."""

from servelab import checkpoint
from servelab.kv.scheduler import Prefill, RequestTooLarge

TOPIC = "scheduler"
Admitting = checkpoint(TOPIC, 1)
Final = checkpoint(TOPIC, 3)


class FitRoundsUp(Admitting):
    """Counts `n // block_size + 1` blocks in its own helper: a prompt that fills its blocks
    exactly is refused one block early."""

    def _blocks(self, n):
        return n // self.bm.block_size + 1

    def fits(self, n_tokens):
        return self.bm.num_free - self._blocks(n_tokens) >= self.watermark


class AddForgetsNewTokens(Final):
    """The size check counts the prompt only, not the tokens still to come."""

    def add(self, seq):
        need = self.bm.blocks_needed(seq.prompt_len)
        if need > self.bm.num_blocks - self.watermark:
            raise RequestTooLarge(f"sequence {seq.seq_id} is too large")
        self.waiting.append(seq)


class AdmitRequeuesAtBack(Final):
    """Takes the next sequence off the queue before checking it fits, and puts it back last."""

    def admit(self, out):
        for _ in range(len(self.waiting)):
            seq = self.waiting.popleft()
            n = seq.num_tokens
            if not self.fits(n):
                self.waiting.append(seq)
                break
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


MISTAKES = {
    "fit counts one block too many": (1, FitRoundsUp, {"fits"}),
    "size check forgets new tokens": (3, AddForgetsNewTokens, {"add"}),
    "admit puts a waiting sequence back last": (3, AdmitRequeuesAtBack, {"admit"}),
}
