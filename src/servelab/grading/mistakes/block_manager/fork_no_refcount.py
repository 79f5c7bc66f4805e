"""Mistake: fork copies the table but does not raise the refcounts."""

from servelab.grading.mistakes.block_manager import Correct

HINT = "refcount"
LIKE = "copies the parent's table on fork without raising the refcount of its blocks"


class Buggy(Correct):
    def fork(self, parent, child):
        self._known(parent)
        self._new(child)
        self.tables[child] = list(self.tables[parent])
        self.lens[child] = self.lens[parent]
