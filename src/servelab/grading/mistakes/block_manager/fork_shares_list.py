"""fork gives the child the parent's own table list, so appends to one show in the other."""

from servelab.grading.mistakes.block_manager import Correct

HINT = "list object"
LIKE = "gives the forked child the parent's very same list object as its block table"


class Buggy(Correct):
    def fork(self, parent, child):
        self._known(parent)
        self._new(child)
        table = self.tables[parent]
        for block in table:
            self.ref[block] += 1
        self.tables[child] = table
        self.lens[child] = self.lens[parent]
