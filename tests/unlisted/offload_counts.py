"""KV offload slips whose first differing call shows the rule it breaks: a pin taken for a use,
a chunk counted at more than its bytes, victims written down last first, a store that drops
the copy below."""

from servelab import checkpoint
from servelab.kv.offload.errors import ChunkTooLarge

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)
Final = checkpoint(TOPIC, 4)


class PinIsAUse(Pinned):
    """Takes a pin for a use: under LRU the pinned chunk also moves to the newest end."""

    def pin(self, key):
        self._resident(key, "pin")
        self._pins[key] = self._pins.get(key, 0) + 1
        if self.policy == "LRU":
            self._sizes.move_to_end(key)
        return self._pins[key]


class PutCountsKeyBytes(Pinned):
    """Counts the key's characters into a chunk's bytes, as the stored record holds both."""

    def put(self, key, payload):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        size += len(str(key))
        if size > self.free:
            return None
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return []


class CascadeLastFirst(Final["Hierarchy"]):
    """Writes each batch of victims down a tier newest first (reversed)."""

    def _cascade(self, start, chunks):
        for tier in self.tiers[start:]:
            below = []
            for key, payload in reversed(chunks):
                if key not in tier and len(payload) <= tier.capacity:
                    below += tier.put(key, payload) or []
            chunks = below


class StoreDropsTheCopyBelow(Final["Hierarchy"]):
    """Stores into the CPU tier and removes the disk copy of the same key, as if a chunk lived
    in one tier at a time."""

    def store(self, key, payload):
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return False
        self._cascade(1, evicted)
        disk = self.tiers[1]
        if key in disk and disk.can_evict(key):
            disk.remove(key)
        return True


MISTAKES = {
    "a pin taken for a use": (1, PinIsAUse, {"pin"}),
    "a chunk counted with its key's characters": (1, PutCountsKeyBytes, {"put"}),
    "victims written down last first": (
        3,
        {**Final, "Hierarchy": CascadeLastFirst},
        {"Hierarchy._cascade"},
    ),
    "a store drops the copy below": (
        3,
        {**Final, "Hierarchy": StoreDropsTheCopyBelow},
        {"Hierarchy.store"},
    ),
}
