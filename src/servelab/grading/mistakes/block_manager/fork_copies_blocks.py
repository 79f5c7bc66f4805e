"""fork gives the child fresh blocks of its own instead of sharing the parent's."""

from servelab.grading.mistakes.block_manager import Correct
from servelab.kv.blocks import OutOfBlocks

HINT = "instead of sharing"
LIKE = "gives a forked child fresh copies of its parent's blocks instead of sharing them"


class Buggy(Correct):
    def fork(self, parent, child):
        self._known(parent)
        self._new(child)
        need = len(self.tables[parent])
        if need > len(self.free):
            raise OutOfBlocks(f"need {need}, have {len(self.free)}")
        self.tables[child] = [self._alloc() for _ in range(need)]
        self.lens[child] = self.lens[parent]
