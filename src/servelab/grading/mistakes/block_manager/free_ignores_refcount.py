"""free_seq puts every block of the sequence back on the free list, shared or not."""

from servelab.grading.mistakes.block_manager.correct import BlockManager

HINT = "ignore the refcount"
LIKE = "lets free_seq ignore the refcount: it frees blocks another sequence still holds"


class Buggy(BlockManager):
    def free_seq(self, seq):
        table = self._table(seq)
        del self.tables[seq], self.lens[seq]
        for b in table:
            if self.ref[b] > 0:
                self.ref[b] = 0
                self.free.append(b)
