"""KV offload slips at the limits of what a chunk and a load are: a payload that is no chunk,
a chunk larger than the whole CPU tier offered to the hierarchy, a load priced over a second
link or with its latency in another unit."""

from servelab import checkpoint
from servelab.kv.offload.errors import ChunkTooLarge

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)
Evicting = checkpoint(TOPIC, 2)
Staged = checkpoint(TOPIC, 3)
Final = checkpoint(TOPIC, 4)


class PutSizesByLen(Pinned):
    """Step 1, put: sizes the payload with `len(payload)`, not `_payload_size`: an empty
    payload is stored as a chunk of 0 bytes, a str as its characters."""

    def put(self, key, payload):
        size = len(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} takes {size} B, more than the {self.capacity} B tier")
        if key in self._sizes:
            self.get(key)
            return []
        if size > self.free:
            return None
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return []


class PutKeepsVictimBytes(Evicting):
    """Step 2, put: drops each victim by hand (`del self._sizes[v]`, `_drop`) instead of
    `_discard`, and never takes its bytes off `used`."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} takes {size} B, more than the {self.capacity} B tier")
        if key in self._sizes:
            self.get(key)
            return []
        for attempt in range(wait + 1):
            if attempt:
                self._sleep()
            victims = self._choose_victims(size)
            if victims is not None:
                break
        else:
            return None
        evicted = [(v, self._read(v)) for v in victims]
        copy = self._write(key, payload)
        for v in victims:
            del self._sizes[v]
            self._drop(v)
        self._data[key] = copy
        self._sizes[key] = size
        self._used += size
        return evicted


class StoreTooLargeIsMiss(Staged["Hierarchy"]):
    """Step 3, store: catches ChunkTooLarge and answers False, as if the CPU tier were full."""

    def store(self, key, payload):
        try:
            evicted = self.tiers[0].put(key, payload)
        except ChunkTooLarge:
            return False
        if evicted is None:
            return False
        self._cascade(1, evicted)
        return True


class StoreTooLargeToDisk(Staged["Hierarchy"]):
    """Step 3, store: writes a chunk larger than the CPU tier straight into the disk tier."""

    def store(self, key, payload):
        if len(payload) > self.tiers[0].capacity:
            return self.tiers[1].put(key, payload) is not None
        return super().store(key, payload)


class CascadeStopsAtRefusal(Staged["Hierarchy"]):
    """Step 3, _cascade: stops a batch at the first victim the tier below has no room for:
    the victims after it are lost, though they would fit."""

    def _cascade(self, start, chunks):
        for tier in self.tiers[start:]:
            below = []
            for key, payload in chunks:
                if key not in tier and len(payload) <= tier.capacity:
                    got = tier.put(key, payload)
                    if got is None:
                        break
                    below += got
            chunks = below


class StoreSkipsHeldBelow(Staged["Hierarchy"]):
    """Step 3, store: answers True for a key some tier holds already, without putting it into
    the CPU tier: a chunk stored again after its eviction stays on disk."""

    def store(self, key, payload):
        if any(key in t for t in self.tiers):
            return True
        return super().store(key, payload)


class LookupByGet(Staged["Hierarchy"]):
    """Step 3, lookup: tests presence with `tier.get(key) is not None`: the lookup is a use,
    so a chunk looked up and released moves to the newest end of its tier's order."""

    def lookup(self, keys):
        found = []
        for key in keys:
            where = next((i for i, t in enumerate(self.tiers) if t.get(key) is not None), None)
            if where is None:
                break
            self.tiers[where].pin(key)
            found.append((key, where))
        return found


class CascadeRefreshesCopyBelow(Staged["Hierarchy"]):
    """Step 3, _cascade: puts every victim into the tier below, one it holds already too: a
    put of a held key is a use there, and refreshes the disk copy's place."""

    def _cascade(self, start, chunks):
        for tier in self.tiers[start:]:
            below = []
            for key, payload in chunks:
                if len(payload) <= tier.capacity:
                    below += tier.put(key, payload) or []
            chunks = below


class CascadeRaisesOnLargeVictim(Staged["Hierarchy"]):
    """Step 3, _cascade: puts every victim into the tier below without checking its size: a
    victim larger than the whole disk tier raises ChunkTooLarge from the disk tier's put,
    after the CPU tier has evicted it (the store left half done instead of the victim dropped)."""

    def _cascade(self, start, chunks):
        for tier in self.tiers[start:]:
            below = []
            for key, payload in chunks:
                if key not in tier:
                    below += tier.put(key, payload) or []
            chunks = below


class DiskLoadAddsHostHop(Final["Hierarchy"]):
    """Step 4, load_seconds: a disk load also pays the CPU link's whole load (two hops)."""

    def load_seconds(self, tokens, tier):
        seconds = super().load_seconds(tokens, tier)
        if tier != "cpu":
            seconds += super().load_seconds(tokens, "cpu")
        return seconds


class LatencyInMilliseconds(Final["Hierarchy"]):
    """Step 4, load_seconds: reads the link's latency_s as milliseconds (divides it by 1000)."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s / 1000 + tokens * kv_bytes / link.bandwidth


class LoadBottleneckLink(Final["Hierarchy"]):
    """Step 4, load_seconds: prices a disk load over the slower of the disk and host links
    (the smaller bandwidth, the larger latency)."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        bandwidth, latency = link.bandwidth, link.latency_s
        if tier != "cpu":
            host = self.links["cpu"]
            bandwidth, latency = min(bandwidth, host.bandwidth), max(latency, host.latency_s)
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        return -(-tokens // self.chunk_tokens) * latency + tokens * kv_bytes / bandwidth


MISTAKES = {
    "a payload sized by len": (1, PutSizesByLen, {"put"}),
    "a put that keeps its victims' bytes": (2, PutKeepsVictimBytes, {"put"}),
    "a chunk too large for the cpu tier taken for a miss": (
        3,
        {**Staged, "Hierarchy": StoreTooLargeIsMiss},
        {"Hierarchy.store"},
    ),
    "a chunk too large for the cpu tier written to disk": (
        3,
        {**Staged, "Hierarchy": StoreTooLargeToDisk},
        {"Hierarchy.store"},
    ),
    "a cascade that stops at a refused victim": (
        3,
        {**Staged, "Hierarchy": CascadeStopsAtRefusal},
        {"Hierarchy._cascade"},
    ),
    "a cascade that raises on a victim too large for disk": (
        3,
        {**Staged, "Hierarchy": CascadeRaisesOnLargeVictim},
        {"Hierarchy._cascade"},
    ),
    "a chunk held below not stored again": (
        3,
        {**Staged, "Hierarchy": StoreSkipsHeldBelow},
        {"Hierarchy.store"},
    ),
    "a lookup that is a use": (3, {**Staged, "Hierarchy": LookupByGet}, {"Hierarchy.lookup"}),
    "a cascade that refreshes the copy below": (
        3,
        {**Staged, "Hierarchy": CascadeRefreshesCopyBelow},
        {"Hierarchy._cascade"},
    ),
    "a disk load that adds the host link": (
        4,
        {**Final, "Hierarchy": DiskLoadAddsHostHop},
        {"Hierarchy.load_seconds"},
    ),
    "a link latency read in milliseconds": (
        4,
        {**Final, "Hierarchy": LatencyInMilliseconds},
        {"Hierarchy.load_seconds"},
    ),
    "a disk load over the bottleneck link": (
        4,
        {**Final, "Hierarchy": LoadBottleneckLink},
        {"Hierarchy.load_seconds"},
    ),
}
