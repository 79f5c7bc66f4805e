"""LMCache's busy loop: while no room can be made, pause and retry, with no bound."""

from servelab.grading.mistakes.kv_offload import Correct
from servelab.kv.offload.errors import ChunkTooLarge

HINT = "never returned"
LIKE = "retries forever while every chunk is pinned: a busy wait that never returned"


class BuggyTier(Correct["Tier"]):
    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        victims = self._choose_victims(size)
        while victims is None:
            if not wait:
                return None
            self._sleep()
            victims = self._choose_victims(size)
        evicted = [(v, self._read(v)) for v in victims]
        copy = self._write(key, payload)
        for v in victims:
            self._discard(v)
        self._data[key] = copy
        self._sizes[key] = size
        self._used += size
        return evicted


Buggy = {**Correct, "Tier": BuggyTier}
