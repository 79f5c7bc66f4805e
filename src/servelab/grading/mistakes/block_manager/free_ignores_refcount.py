"""free_seq puts every block of the sequence back on the free list, shared or not."""

from servelab.grading.mistakes.block_manager import Correct

HINT = "ignore the refcount"
LIKE = "lets free_seq ignore the refcount: it frees blocks another sequence still holds"


class Buggy(Correct):
    def free_seq(self, seq):
        self._known(seq)
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in reversed(table):
            if self.ref[block] > 0:
                self.ref[block] = 0
                self.free.append(block)
