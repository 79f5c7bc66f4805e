"""Mistake: fork copies the table but does not raise the refcounts."""

from servelab.grading.mistakes.block_manager.correct import BlockManager

HINT = "refcount"
LIKE = "copies the parent's table on fork without raising the refcount of its blocks"


class Buggy(BlockManager):
    def fork(self, parent: int, child: int) -> None:
        table = self._table(parent)
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]
