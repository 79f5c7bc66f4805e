"""A block-manager slip only a later read shows: free_seq releases by descending block id,
which is the table's reverse order only while the table is sorted."""

from servelab import checkpoint

TOPIC = "block-manager"
Allocating = checkpoint(TOPIC, 1)


class FreeByDescendingId(Allocating):
    """free_seq releases `sorted(table, reverse=True)` instead of the table reversed."""

    def free_seq(self, seq):
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in sorted(table, reverse=True):
            self._release(block)


MISTAKES = {"blocks freed by descending id": (1, FreeByDescendingId, {"free_seq"})}
