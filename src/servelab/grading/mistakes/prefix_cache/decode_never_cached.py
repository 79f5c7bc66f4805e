"""A block that decoding fills is never cached: only prompt blocks are."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "decoding fills"
LIKE = "never caches a block that decoding fills; only the prompt's full blocks are cached"


class Buggy(Correct):
    def append_slot(self, seq, token_id):
        self._table(seq)
        slot = self._reserve_slot(seq)
        self.seq_tokens[seq].append(token_id)
        return slot
