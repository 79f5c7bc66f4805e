"""Scheduler slips against a rule the notebook states outright: `fits(n_tokens)` answers for a
number of tokens."""

from servelab import checkpoint
from servelab.kv.scheduler import Prefill

TOPIC = "scheduler"
Admitting = checkpoint(TOPIC, 1)


class FitsTakesBlocks(Admitting):
    """Reads `fits` as taking a count of blocks: its own `admit` converts first, so admission
    is right, but `fits(n_tokens)` answers for n_tokens blocks."""

    def fits(self, n_blocks):
        return self.bm.num_free - n_blocks >= self.watermark

    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_tokens
            if not self.fits(self.blocks_needed(n)):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


MISTAKES = {
    "fits takes a count of blocks": (1, FitsTakesBlocks, {"fits", "admit"}),
}
