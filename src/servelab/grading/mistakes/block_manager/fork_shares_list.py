"""fork gives the child the parent's own table list, so appends to one show in the other."""

from servelab.grading.mistakes.block_manager.correct import BlockManager
from servelab.kv.blocks import SequenceExists

HINT = "list object"
LIKE = "gives the forked child the parent's very same list object as its block table"


class Buggy(BlockManager):
    def fork(self, parent, child):
        table = self._table(parent)
        if child in self.tables:
            raise SequenceExists(f"sequence {child} exists")
        for b in table:
            self.ref[b] += 1
        self.tables[child] = table
        self.lens[child] = self.lens[parent]
