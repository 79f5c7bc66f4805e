"""Mistake: fork copies the table but does not raise the refcounts."""
# expected hint word: refcount

from .learner import BlockManager as Correct


class BlockManager(Correct):
    def fork(self, parent: int, child: int) -> None:
        table = self._table(parent)
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]
