"""free_seq releases the blocks but keeps the table, so a second free_seq frees them again (vLLM
#42571)."""

from servelab.grading.mistakes.block_manager.correct import BlockManager

HINT = "freed twice"
LIKE = "releases a sequence's blocks but keeps its table, so its blocks can be freed twice"


class Buggy(BlockManager):
    def free_seq(self, seq):
        for b in self._table(seq):
            if self.ref[b] > 0:
                self._release(b)
