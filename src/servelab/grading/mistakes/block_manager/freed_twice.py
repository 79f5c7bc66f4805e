"""free_seq releases the blocks but keeps the table, so a second free_seq frees them again."""

from servelab.grading.mistakes.block_manager import Correct

HINT = "freed twice"
LIKE = "releases a sequence's blocks but keeps its table, so its blocks can be freed twice"


class Buggy(Correct):
    def free_seq(self, seq):
        self._known(seq)
        for block in reversed(self.tables[seq]):
            if self.ref[block] > 0:
                self._release(block)
