"""The eviction loop evicts one victim at a time and finds out too late that the rest are
pinned: the miss has thrown chunks away for nothing."""

from servelab.grading.mistakes.kv_offload import Correct
from servelab.kv.offload.errors import ChunkTooLarge

HINT = "before deciding"
LIKE = "evicts chunks before deciding whether it can make room at all"


class BuggyTier(Correct["Tier"]):
    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        evicted = []
        for attempt in range(wait + 1):
            if attempt:
                self._sleep()
            for victim in list(self._sizes):
                if size <= self.free:
                    break
                if self.can_evict(victim):
                    evicted.append((victim, self._read(victim)))
                    self._discard(victim)
            if size <= self.free:
                break
        else:
            return None
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return evicted


Buggy = {**Correct, "Tier": BuggyTier}
