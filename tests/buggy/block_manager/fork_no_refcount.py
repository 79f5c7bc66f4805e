"""Mistake: fork copies the table but does not raise the refcounts."""

from correct import BlockManager

HINT = "refcount"


class Buggy(BlockManager):
    def fork(self, parent: int, child: int) -> None:
        table = self._table(parent)
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]
