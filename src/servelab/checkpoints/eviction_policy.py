"""Checkpoints of the 'eviction-policy' course notebook: its solution, step by step.

Generated from solutions/02_eviction_policies_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('eviction-policy', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


import copy
import heapq
from servelab.weights.policies import EvictionPolicy, NoVictim


from servelab.carry_forward import stand_in
YourCache = stand_in('weight-cache')


class PolicyCache(YourCache):
    """Your notebook-01 cache; a policy object chooses the victims and reports the order."""

    def __init__(self, capacity_bytes, policy):
        super().__init__(capacity_bytes)
        self.policy = policy

    def get(self, key):
        if key in self._entries:
            self.policy.update_on_hit(key)
        return super().get(key)

    def put(self, key, value, size):
        self._check_can_admit(key, size)  # your checks first: an error changes nothing
        if key in self._entries:
            self.policy.update_on_remove(key)  # a replacement is a new entry
        super().put(key, value, size)
        self.policy.update_on_put(key, size)

    def _next_victim(self):
        return self.policy.pop_victim()  # the policy forgets its victim as it names it

    def pin(self, key):
        count = super().pin(key)
        if count == 1:
            self.policy.update_on_pin(key)
        return count

    def unpin(self, key):
        left = super().unpin(key)
        if left == 0:
            self.policy.update_on_unpin(key)
        return left

    def eviction_order(self):
        return self.policy.eviction_order()


class LFUCounts:
    name = "LFU"

    def __init__(self):
        self.count = {}  # key -> uses (1 on put, +1 per hit); every resident key
        self.reached = {}  # key -> tick at which it reached its count
        self.pinned = set()
        self.heap = []  # (count, reached, key); stale entries are skipped when popped
        self.clock = 0

    def update_on_put(self, key, size):
        self.clock += 1
        self.count[key] = 1
        self.reached[key] = self.clock
        heapq.heappush(self.heap, (1, self.clock, key))

    def update_on_hit(self, key):
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:  # a pinned key is pushed again when it is unpinned
            heapq.heappush(self.heap, (self.count[key], self.clock, key))

    def update_on_remove(self, key):
        del self.count[key], self.reached[key]
        self.pinned.discard(key)

    def eviction_order(self):
        """The candidates, next victim first: by count, then by when the count was reached."""
        candidates = [k for k in self.count if k not in self.pinned]
        return sorted(candidates, key=lambda k: (self.count[k], self.reached[k]))


class LFUVictims(LFUCounts):
    def pop_victim(self):
        while self.heap:
            count, reached, key = heapq.heappop(self.heap)
            current = (self.count.get(key), self.reached.get(key))
            if key not in self.pinned and current == (count, reached):
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")

    def __len__(self):
        return len(self.count) - len(self.pinned)


class LFU(LFUVictims, EvictionPolicy):
    def update_on_pin(self, key):
        self.pinned.add(key)

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        heapq.heappush(self.heap, (self.count[key], self.reached[key], key))


class SIEVEEvents:
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

    def update_on_pin(self, key):
        self.pinned.add(key)

    def update_on_unpin(self, key):
        self.pinned.discard(key)

    def __len__(self):
        return len(self.queue) - len(self.pinned)


class SIEVERemovals(SIEVEEvents):
    def update_on_remove(self, key):
        i = self.queue.index(key)
        if self.hand == key:  # the hand moves on to the next newer key
            self.hand = self.queue[i + 1] if i + 1 < len(self.queue) else None
        del self.queue[i]
        del self.visited[key]
        self.pinned.discard(key)


class SIEVE(SIEVERemovals, EvictionPolicy):
    def pop_victim(self):
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):  # past the newest: wrap to the oldest
                i = 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.hand = key
                self.update_on_remove(key)  # moves the hand past the victim
                return key

    def eviction_order(self):
        trial = copy.deepcopy(self)
        return [trial.pop_victim() for _ in range(len(trial))]


TOPIC = 'eviction-policy'
STEPS = {
    1: lambda: LFUCounts,
    2: lambda: LFU,
    3: lambda: {"LFU": LFU, "SIEVE": SIEVERemovals},
    4: lambda: {"LFU": LFU, "SIEVE": SIEVE},
}
