"""Learner-style LFU and SIEVE, as notebook 02's solution writes them."""

import copy
import heapq

from servelab.weights.policies import EvictionPolicy, NoVictim


class LFU(EvictionPolicy):
    name = "LFU"

    def __init__(self):
        self.count = {}  # key -> uses (1 on put, +1 per hit), pinned keys included
        self.reached = {}  # key -> tick at which it reached its count
        self.pinned = set()
        self.heap = []  # (count, reached, key); stale entries are skipped
        self.clock = 0

    def _rank(self, key):
        return (self.count[key], self.reached[key])

    def _touch(self, key):
        self.clock += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (*self._rank(key), key))

    def update_on_put(self, key, size):
        self.count[key] = 1
        self._touch(key)

    def update_on_hit(self, key):
        self.count[key] += 1
        self._touch(key)

    def update_on_remove(self, key):
        del self.count[key], self.reached[key]
        self.pinned.discard(key)

    def update_on_pin(self, key):
        self.pinned.add(key)

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        heapq.heappush(self.heap, (*self._rank(key), key))

    def pop_victim(self):
        while self.heap:
            count, reached, key = heapq.heappop(self.heap)
            if key in self.count and key not in self.pinned and self._rank(key) == (count, reached):
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")

    def eviction_order(self):
        return sorted((k for k in self.count if k not in self.pinned), key=self._rank)

    def __len__(self):
        return len(self.count) - len(self.pinned)


class SIEVE(EvictionPolicy):
    name = "SIEVE"

    def __init__(self):
        self.queue = []  # keys, oldest first, pinned ones included
        self.visited = {}
        self.pinned = set()
        self.hand = None  # the key the hand points at; None: start at the oldest

    def update_on_put(self, key, size):
        self.queue.append(key)
        self.visited[key] = False

    def update_on_hit(self, key):
        self.visited[key] = True

    def update_on_remove(self, key):
        i = self.queue.index(key)
        if self.hand == key:
            self.hand = self.queue[i + 1] if i + 1 < len(self.queue) else None
        del self.queue[i]
        del self.visited[key]
        self.pinned.discard(key)

    def update_on_pin(self, key):
        self.pinned.add(key)

    def update_on_unpin(self, key):
        self.pinned.discard(key)

    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.hand = key
                self.update_on_remove(key)
                return key

    def eviction_order(self):
        trial = copy.deepcopy(self)
        return [trial.pop_victim() for _ in range(len(trial))]

    def __len__(self):
        return len(self.queue) - len(self.pinned)


Correct = {"LFU": LFU, "SIEVE": SIEVE}
