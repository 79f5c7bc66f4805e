"""free_seq releases a table head first, so a sequence's shared prefix becomes the first
cached block to be reclaimed and its private tail the last."""

from servelab.grading.mistakes.prefix_cache import Correct

HINT = "tail first"
LIKE = "frees a table head first, so its prefix is reclaimed before its tail; free tail first"


class Buggy(Correct):
    def free_seq(self, seq):
        table = self._table(seq)
        del self.tables[seq], self.seq_tokens[seq]
        for block in table:
            self._release(block)
