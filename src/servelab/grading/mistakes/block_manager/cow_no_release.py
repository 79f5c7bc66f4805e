"""Copy-on-write takes a new block but never drops the reference to the shared one (a leak)."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import Slot

HINT = "drop"
LIKE = "copies a shared block on write but does not drop its reference to the old one"


class Buggy(Correct):
    def append_slot(self, seq):
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset and self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            table[-1] = new
            self.lens[seq] = n + 1
            return Slot(new, offset, cow_src)
        return super().append_slot(seq)
