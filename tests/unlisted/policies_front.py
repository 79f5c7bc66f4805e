"""Eviction-policy slips in where a heap entry leaves and where an unpinned key stands: an LFU
that takes its heap's first list entry (right only while the list stays sorted), and a SIEVE
unpin that moves its key to the newest end (only the queue shows it)."""

from servelab import checkpoint
from servelab.weights.policies import NoVictim

TOPIC = "eviction-policy"
ALONE = checkpoint(TOPIC, 2)
REMOVALS = checkpoint(TOPIC, 3)


class LFUPopsListFront(ALONE):
    """Takes entries with `self.heap.pop(0)`: the rest of the list leaves heap order."""

    def pop_victim(self):
        while self.heap:
            count, reached, key = self.heap.pop(0)
            if key not in self.pinned and (self.count.get(key), self.reached.get(key)) == (
                count,
                reached,
            ):
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")


class SIEVEUnpinRequeues(REMOVALS["SIEVE"]):
    """An unpin sends its key to the newest end of the queue."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.queue.remove(key)
        self.queue.append(key)


MISTAKES = {
    "LFU pops the heap list's front": (2, LFUPopsListFront, {"pop_victim"}),
    "SIEVE unpin requeues the key": (
        3,
        {**REMOVALS, "SIEVE": SIEVEUnpinRequeues},
        {"SIEVE.update_on_unpin"},
    ),
}
