"""free_seq releases a table head first: with a prefix cache on top, the shared head of a
prompt becomes the first freed block to be reused and its private tail the last."""

from servelab.grading.mistakes.block_manager import Correct

HINT = "tail first"
LIKE = "frees a table head first; free it tail first (last block first), so the head stays longest"


class Buggy(Correct):
    def free_seq(self, seq):
        self._known(seq)
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in table:
            self._release(block)
