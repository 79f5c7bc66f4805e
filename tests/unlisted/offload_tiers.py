"""KV offload slips at a tier's edges: a choice of victims at a chunk can_evict refuses, a
chunk's bytes, a put of a key the tier holds, a disk write copied over the chunk's name, the
victims a disk put hands back, a retrieve's reads, a load's bytes."""

import os
import shutil

from servelab import checkpoint
from servelab.kv.offload.errors import ChunkInUse

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)
Evicting = checkpoint(TOPIC, 2)
S3 = checkpoint(TOPIC, 3)
S4 = checkpoint(TOPIC, 4)
HEADER = 8


class RemoveDropsTheCopyFirst(Pinned):
    """Step 1, remove: frees the chunk's copy before asking can_evict: a refused remove raises
    ChunkInUse with the books unchanged and the copy gone."""

    def remove(self, key):
        self._resident(key, "remove")
        self._drop(key)
        if not self.can_evict(key):
            raise ChunkInUse(f"{key!r} is in use")
        self._used -= self._sizes.pop(key)


class VictimsCountRefusedBytes(Evicting):
    """Step 2, _choose_victims: subtracts every chunk's bytes from what it still needs, also
    those of a chunk it skips because can_evict refuses it."""

    def _choose_victims(self, size):
        need = size - self.free
        victims = []
        for key in self._sizes:
            if need <= 0:
                break
            if self.can_evict(key):
                victims.append(key)
            need -= self._sizes[key]
        return victims if need <= 0 else None


class VictimsStopAtRefused(Evicting):
    """Step 2, _choose_victims: gives up at the first chunk can_evict refuses, as if the
    policy order were a queue blocked at its head."""

    def _choose_victims(self, size):
        need = size - self.free
        victims = []
        for key in self._sizes:
            if need <= 0:
                break
            if not self.can_evict(key):
                return None
            victims.append(key)
            need -= self._sizes[key]
        return victims if need <= 0 else None


class PutAgainUpdates(Evicting):
    """Step 2, put: a key the tier holds gets the new payload and its size in place (an
    update), with no room made for a larger one."""

    def put(self, key, payload, wait=0):
        if key in self._sizes:
            size = self._payload_size(payload)
            self._used += size - self._sizes[key]
            self._drop(key)
            self._data[key] = self._write(key, payload)
            self._sizes[key] = size
            self.get(key)
            return []
        return super().put(key, payload, wait)


class RecordsBeforeItFits(Evicting):
    """Step 2, put: records the new chunk's size and bytes before choosing victims (the new
    key skipped among them): a miss leaves it in the books."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity or key in self._sizes:
            return super().put(key, payload, wait)
        self._sizes[key] = size
        self._used += size
        for attempt in range(wait + 1):
            if attempt:
                self._sleep()
            need, victims = self._used - self.capacity, []
            for k in self._sizes:
                if need <= 0:
                    break
                if k != key and self.can_evict(k):
                    victims.append(k)
                    need -= self._sizes[k]
            if need <= 0:
                break
        else:
            return None
        evicted = [(v, self._read(v)) for v in victims]
        for v in victims:
            self._discard(v)
        self._data[key] = self._write(key, payload)
        return evicted


class PutResidentBeforeSize(Evicting):
    """Step 2, put: answers a key the tier holds (a use, []) before it checks the size: a
    chunk larger than the tier under a resident key is not refused, but nothing changes."""

    def put(self, key, payload, wait=0):
        if key in self._sizes:
            self.get(key)
            return []
        return super().put(key, payload, wait)


class RetrieveReadsEveryCopy(S3["Hierarchy"]):
    """Step 3, retrieve: reads a found chunk through every tier holding a copy (each get a
    use), so a copy in a tier the lookup did not return moves in that tier's order."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            for t in self.tiers:
                if key in t and t is not self.tiers[i]:
                    t.get(key)
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) <= top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        for key, i in found:
            self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        return payloads


class PromotionVictimsPutBelow(S3["Hierarchy"]):
    """Step 3, retrieve: writes the cpu tier's victims of a promotion straight into the disk
    tier with put, without the cascade's checks: a victim the disk holds already is a use
    there, and moves to the newest end."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) <= top.capacity:
                for k, p in top.put(key, payload) or []:
                    self.tiers[1].put(k, p)
        for key, i in found:
            self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        return payloads


class CopyOverTheChunk(S3["DiskTier"]):
    """Step 3, DiskTier._write: a whole temporary file, then shutil.copyfile over the chunk's
    name (a second write in place, not a rename) and the temporary deleted."""

    def _write(self, key, payload):
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        shutil.copyfile(temporary, final)
        os.unlink(temporary)
        return final


class DiskCountsItsHeader(S3["DiskTier"]):
    """Step 3, DiskTier: each file starts with an 8-byte length header, and the tier counts
    the header into a chunk's bytes (its reads strip it correctly)."""

    def _payload_size(self, payload):
        return super()._payload_size(payload) + HEADER

    def _write(self, key, payload):
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(len(payload).to_bytes(HEADER, "little"))
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, final)
        return final

    def _read(self, key):
        return self._data[key].read_bytes()[HEADER:]


class DiskCountsATenthMore(S3["DiskTier"]):
    """Step 3, DiskTier._payload_size: a tenth more than the payload, rounded down: neither
    one number of bytes nor one factor over every length."""

    def _payload_size(self, payload):
        n = super()._payload_size(payload)
        return n + n // 10


class VictimsWithTheirCopy(S3["DiskTier"]):
    """Step 3, DiskTier.put: hands back each victim with the tier's stored copy (`_data[v]`),
    the file's path, not its payload."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if key in self._sizes or size > self.capacity:
            return super().put(key, payload, wait)
        for attempt in range(wait + 1):
            if attempt:
                self._sleep()
            victims = self._choose_victims(size)
            if victims is not None:
                break
        else:
            return None
        evicted = [(v, self._data[v]) for v in victims]
        copy = self._write(key, payload)
        for v in victims:
            self._discard(v)
        self._data[key] = copy
        self._sizes[key] = size
        self._used += size
        return evicted


class LoadWholeChunks(S4["Hierarchy"]):
    """Step 4, load_seconds: moves whole chunks: a partial last chunk's bytes padded to
    chunk_tokens tokens."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + chunks * self.chunk_tokens * kv_bytes / link.bandwidth


class LookupDropsItsPinsOnAMiss(S3["Hierarchy"]):
    """Step 3, lookup: all or nothing: on the first key no tier holds it unpins what it has
    pinned and returns []."""

    def lookup(self, keys):
        found = []
        for key in keys:
            where = next((i for i, t in enumerate(self.tiers) if key in t), None)
            if where is None:
                for k, i in found:
                    self.tiers[i].unpin(k)
                return []
            self.tiers[where].pin(key)
            found.append((key, where))
        return found


class LookupStopsBelowTheCpu(S3["Hierarchy"]):
    """Step 3, lookup: stops at the first key the cpu tier does not hold, as if a disk hit
    were a miss (nothing pinned is taken back)."""

    def lookup(self, keys):
        found = []
        for key in keys:
            if key not in self.tiers[0]:
                break
            self.tiers[0].pin(key)
            found.append((key, 0))
        return found


def _at(step, cls, place):
    if step <= 2:
        return (step, cls, {place})
    base = {3: S3, 4: S4}[step]
    name = place.partition(".")[0]
    return (step, {**base, name: cls}, {place})


MISTAKES = {
    "a refused remove drops the copy": _at(1, RemoveDropsTheCopyFirst, "remove"),
    "victims counted with the bytes of a refused chunk": _at(
        2, VictimsCountRefusedBytes, "_choose_victims"
    ),
    "victims given up at the first refused chunk": _at(2, VictimsStopAtRefused, "_choose_victims"),
    "a put of a resident key updates it": _at(2, PutAgainUpdates, "put"),
    "a chunk recorded before it fits": _at(2, RecordsBeforeItFits, "put"),
    "a put of a resident key before the size check": _at(2, PutResidentBeforeSize, "put"),
    "a retrieve reads every copy": _at(3, RetrieveReadsEveryCopy, "Hierarchy.retrieve"),
    "a promotion's victims put below": _at(3, PromotionVictimsPutBelow, "Hierarchy.retrieve"),
    "a disk write copied over the chunk": _at(3, CopyOverTheChunk, "DiskTier._write"),
    "a disk chunk counted with its header": _at(3, DiskCountsItsHeader, "DiskTier._payload_size"),
    "a disk chunk counted a tenth larger": _at(3, DiskCountsATenthMore, "DiskTier._payload_size"),
    "disk victims handed back as paths": _at(3, VictimsWithTheirCopy, "DiskTier.put"),
    "a load of whole chunks": _at(4, LoadWholeChunks, "Hierarchy.load_seconds"),
    "a lookup drops its pins on a miss": _at(3, LookupDropsItsPinsOnAMiss, "Hierarchy.lookup"),
    "a lookup stops below the cpu tier": _at(3, LookupStopsBelowTheCpu, "Hierarchy.lookup"),
}
