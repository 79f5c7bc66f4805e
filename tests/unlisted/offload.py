"""KV offload slips, each on the notebook's own classes."""

from servelab import checkpoint
from servelab.kv.offload.errors import ChunkInUse, ChunkNotReferenced, ChunkTooLarge

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)
Evicting = checkpoint(TOPIC, 2)
Hierarchical = checkpoint(TOPIC, 3)
Final = checkpoint(TOPIC, 4)


class FitNeedsSpare(Pinned):
    """A chunk exactly the size of the free bytes is a miss: `>=` where `>` belongs."""

    def put(self, key, payload):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        if size >= self.free:
            return None
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return []


class UnrefCountsFirst(Pinned):
    """Lowers the reference count before checking it: a refused unref leaves it at -1."""

    def unref(self, key):
        self._resident(key, "unref")
        self._refs[key] = self._refs.get(key, 0) - 1
        if self._refs[key] < 0:
            raise ChunkNotReferenced(f"{key!r} has only the tier's own reference")
        if not self._refs[key]:
            del self._refs[key]
        return self.ref_count(key)


class VictimsOneShort(Evicting):
    """Stops choosing victims while one more byte is still needed."""

    def _choose_victims(self, size):
        need = size - self.free
        victims = []
        for key in self._sizes:
            if need <= 1:
                break
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 1 else None


class ReleaseInTheTopTier(Final["Hierarchy"]):
    """Releases every pin in the CPU tier, wherever the lookup found the chunk."""

    def release(self, found):
        for key, _ in found:
            if key in self.tiers[0] and self.tiers[0].pin_count(key):
                self.tiers[0].unpin(key)


class ReleaseEmptiesFound(Final["Hierarchy"]):
    """Pops each entry off the caller's found list as it unpins it: the pins are right, and
    the caller's list is left empty."""

    def release(self, found):
        while found:
            key, i = found.pop()
            self.tiers[i].unpin(key)


class BandwidthInBits(Final["Hierarchy"]):
    """Reads the link's bandwidth as bits per second: loads look eight times slower."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + 8 * tokens * kv_bytes / link.bandwidth


class ReleaseEvictsToo(Final["Hierarchy"]):
    """Unpins each found chunk and then removes it, as if a released chunk were done with."""

    def release(self, found):
        for key, i in found:
            self.tiers[i].unpin(key)
            self.tiers[i].remove(key)


class ReleaseTopTierOnly(Final["Hierarchy"]):
    """Unpins only what the lookup found in the CPU tier: a disk hit stays pinned for good."""

    def release(self, found):
        for key, i in found:
            if i == 0:
                self.tiers[i].unpin(key)


class LoadInMilliseconds(Final["Hierarchy"]):
    """Returns the load time in milliseconds, the unit its author printed it in."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return 1000 * (chunks * link.latency_s + tokens * kv_bytes / link.bandwidth)


class BandwidthInGigabytes(Final["Hierarchy"]):
    """Converts the KV bytes to GB but divides by a bandwidth in bytes per second."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_gb = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value / 1e9
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv_gb / link.bandwidth


class ChunksRoundedDown(Final["Hierarchy"]):
    """Counts chunk requests as tokens // chunk_tokens: a partial last chunk pays no latency."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        return (tokens // self.chunk_tokens) * link.latency_s + tokens * kv_bytes / link.bandwidth


class DiscardKeepsBytes(Evicting):
    """Forgets the chunk but not its bytes: `used` keeps counting what left."""

    def _discard(self, key):
        self._sizes.pop(key)
        self._drop(key)


class StoreAnswersNoEviction(Final["Hierarchy"]):
    """Answers whether the CPU tier stored without evicting, not whether it stored."""

    def store(self, key, payload):
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return False
        self._cascade(1, evicted)
        return not evicted


class ReleaseFirstOnly(Final["Hierarchy"]):
    """Releases the first chunk the lookup found, as if a lookup found one chunk."""

    def release(self, found):
        for key, i in found[:1]:
            self.tiers[i].unpin(key)


class ReleaseEveryPin(Final["Hierarchy"]):
    """Unpins each found chunk until no pin is left, another lookup's pins included."""

    def release(self, found):
        for key, i in found:
            while self.tiers[i].pin_count(key):
                self.tiers[i].unpin(key)


class RetriesCountTheFirstTry(Evicting):
    """Counts the first try among the `wait` retries: wait=0 makes no try, every put misses."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} takes {size} B, more than the whole tier")
        if key in self._sizes:
            self.get(key)
            return []
        victims = None
        for attempt in range(1, wait + 1):
            if attempt > 1:
                self._sleep()
            victims = self._choose_victims(size)
            if victims is not None:
                break
        if victims is None:
            return None
        evicted = [(v, self._read(v)) for v in victims]
        copy = self._write(key, payload)
        for v in victims:
            self._discard(v)
        self._data[key] = copy
        self._sizes[key] = size
        self._used += size
        return evicted


class LookupPinsEachTierHolding(Final["Hierarchy"]):
    """Pins a found chunk in every tier that holds a copy, not only where it is read."""

    def lookup(self, keys):
        found = []
        for key in keys:
            holding = [i for i, t in enumerate(self.tiers) if key in t]
            if not holding:
                break
            for i in holding:
                self.tiers[i].pin(key)
            found.append((key, holding[0]))
        return found


class RetrieveUnrefsPromotedOnly(Final["Hierarchy"]):
    """Unrefs only the chunks it promoted: a chunk read from the top tier stays referenced."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) <= top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        for key, i in found:
            if i > 0:
                self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        return payloads


class StoreCascadesOneVictim(Final["Hierarchy"]):
    """store writes only the first of the CPU tier's victims down to disk: when one put evicts
    several chunks, the others are lost."""

    def store(self, key, payload):
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return False
        self._cascade(1, evicted[:1])
        return True


class PinRefusesReferenced(Pinned):
    """Refuses to pin a chunk a transfer is reading, as if a pin and a reference excluded
    each other."""

    def pin(self, key):
        self._resident(key, "pin")
        if self._refs.get(key):
            raise ChunkInUse(f"{key!r} is being read")
        self._pins[key] = self._pins.get(key, 0) + 1
        return self._pins[key]


class HeldBytesOfTheFirstSize(Final["Hierarchy"]):
    """Counts each distinct chunk once, but at the size of the first one found, as if every
    chunk had the same size."""

    def held_bytes(self):
        keys = {k for t in self.tiers for k in t.keys()}
        if not keys:
            return 0
        first = next(t for t in self.tiers if len(t))
        return len(keys) * first.size_of(first.keys()[0])


class VictimsFromTheBack(Evicting):
    """Chooses victims from the back of the policy order: the most recently used first."""

    def _choose_victims(self, size):
        need = size - self.free
        victims = []
        for key in reversed(self._sizes):
            if need <= 0:
                break
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 0 else None


class RetrieveWithoutPromotion(Hierarchical["Hierarchy"]):
    """Reads each found chunk where it is and never copies a lower tier's hit up (on step 3's
    classes: the grade of every step once let it pass when carried through step 4)."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        for key, i in found:
            self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        return payloads


class TooLargeAtCapacity(Pinned):
    """Raises ChunkTooLarge at `>=` the capacity: a chunk of exactly the tier's size is refused."""

    def put(self, key, payload, *wait):
        size = self._payload_size(payload)
        if size >= self.capacity:
            raise ChunkTooLarge(f"{key!r} takes {size} B")
        return super().put(key, payload, *wait)


class PutReturnsEvictedKeys(Evicting):
    """Returns the evicted keys, not (key, payload) pairs: the hierarchy cannot write them down."""

    def put(self, key, payload, wait=0):
        evicted = super().put(key, payload, wait)
        return None if evicted is None else [k for k, _ in evicted]


class DropsVictimsBeforeWriting(Evicting):
    """Discards the victims first and writes the new copy after: a write that fails has lost
    them."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} takes {size} B")
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
        for v in victims:
            self._discard(v)
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return evicted


class LookupSaysTopTier(Final["Hierarchy"]):
    """Pins each chunk where it is, but returns every one as found in tier 0."""

    def lookup(self, keys):
        return [(key, 0) for key, _ in super().lookup(keys)]


class RecomputeOneFlopPerParameter(Final["Hierarchy"]):
    """Counts one FLOP per parameter per token: a multiply-add is two."""

    def recompute_seconds(self, tokens):
        m = self.model
        return (m.params * tokens + 2 * m.layers * m.d_model * tokens * tokens) / self.flops


class LoadOverTheDiskLink(Final["Hierarchy"]):
    """Prices every load over the disk link, whichever tier it reads from."""

    def load_seconds(self, tokens, tier):
        return super().load_seconds(tokens, "disk")


class WorthLoadingOverTheHostLink(Final["Hierarchy"]):
    """Decides every load as if it came over the CPU tier's link, whichever tier holds it."""

    def worth_loading(self, tokens, tier):
        return self.load_seconds(tokens, "cpu") < self.recompute_seconds(tokens)


class PutTakesNoVictimsForNoRoom(Evicting):
    """Leaves the retry loop on `if victims:`, so a chunk that fits without evicting
    anything ([] victims) is taken for one with no room: every put that evicts nothing misses,
    however many tries ``wait`` allows."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        for attempt in range(wait + 1):
            if attempt:
                self._sleep()
            victims = self._choose_victims(size)
            if victims:
                break
        else:
            return None
        evicted = [(v, self._read(v)) for v in victims]
        copy = self._write(key, payload)
        for v in victims:
            self._discard(v)
        self._data[key] = copy
        self._sizes[key] = size
        self._used += size
        return evicted


class UnpinBeforePromoting(Final["Hierarchy"]):
    """Step 3, retrieve: reads every chunk, then unrefs and unpins them all before it
    promotes: the promotion may evict a chunk the lookup still holds."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        for key, i in found:
            self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) <= top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        return payloads


class LoadOnATie(Final["Hierarchy"]):
    """Step 4, worth_loading: `<=`: a load that costs exactly the recompute (0 tokens, 0 s
    each) is taken as worth loading."""

    def worth_loading(self, tokens, tier):
        return self.load_seconds(tokens, tier) <= self.recompute_seconds(tokens)


class CascadeAddsNone(Final["Hierarchy"]):
    """Step 3, _cascade: adds each lower put's answer to the next batch without `or []`: a
    lower tier with no room (put returns None) raises TypeError."""

    def _cascade(self, start, chunks):
        for tier in self.tiers[start:]:
            below = []
            for key, payload in chunks:
                if key not in tier and len(payload) <= tier.capacity:
                    below += tier.put(key, payload)
            chunks = below


class PromoteOnlySmaller(Final["Hierarchy"]):
    """Step 3, retrieve: promotes a lower tier's hit only when it is smaller than the CPU
    tier: a chunk of exactly the CPU tier's size stays below."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) < top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        for key, i in found:
            self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        return payloads


class RemoveTriesTheHoldFirst(Pinned):
    """Step 1, remove: asks can_evict before it looks for the chunk: an absent chunk has no
    tier reference, so remove('zz') raises ChunkInUse where ChunkNotFound belongs."""

    def remove(self, key):
        if not self.can_evict(key):
            raise ChunkInUse(f"{key!r} is pinned or referenced")
        self._discard(key)


class VictimsPastAnExactFit(Evicting):
    """Step 2, _choose_victims: stops only once need < 0: when the victims so far free exactly
    the bytes needed, it takes one more."""

    def _choose_victims(self, size):
        need = size - self.free
        if need <= 0:
            return []
        victims = []
        for key in self._sizes:
            if need < 0:
                break
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 0 else None


MISTAKES = {
    "a chunk that exactly fits is a miss": (1, FitNeedsSpare, {"put"}),
    "unref lowers the count before refusing": (1, UnrefCountsFirst, {"unref"}),
    "victims stop one byte short": (2, VictimsOneShort, {"_choose_victims"}),
    "release empties the caller's found list": (
        3,
        {**Final, "Hierarchy": ReleaseEmptiesFound},
        {"Hierarchy.release"},
    ),
    "release unpins in the top tier only": (
        3,
        {**Final, "Hierarchy": ReleaseInTheTopTier},
        {"Hierarchy.release"},
    ),
    "bandwidth read as bits": (
        4,
        {**Final, "Hierarchy": BandwidthInBits},
        {"Hierarchy.load_seconds"},
    ),
    "discard keeps the bytes": (2, DiscardKeepsBytes, {"_discard"}),
    "store answers whether nothing was evicted": (
        3,
        {**Final, "Hierarchy": StoreAnswersNoEviction},
        {"Hierarchy.store"},
    ),
    "release of the first chunk only": (
        3,
        {**Final, "Hierarchy": ReleaseFirstOnly},
        {"Hierarchy.release"},
    ),
    "release drops every pin": (3, {**Final, "Hierarchy": ReleaseEveryPin}, {"Hierarchy.release"}),
    "release removes the chunk": (
        3,
        {**Final, "Hierarchy": ReleaseEvictsToo},
        {"Hierarchy.release"},
    ),
    "release skips disk hits": (
        3,
        {**Final, "Hierarchy": ReleaseTopTierOnly},
        {"Hierarchy.release"},
    ),
    "load time in milliseconds": (
        4,
        {**Final, "Hierarchy": LoadInMilliseconds},
        {"Hierarchy.load_seconds"},
    ),
    "KV bytes in GB over bytes per second": (
        4,
        {**Final, "Hierarchy": BandwidthInGigabytes},
        {"Hierarchy.load_seconds"},
    ),
    "chunk requests rounded down": (
        4,
        {**Final, "Hierarchy": ChunksRoundedDown},
        {"Hierarchy.load_seconds"},
    ),
    "retries count the first try": (2, RetriesCountTheFirstTry, {"put"}),
    "lookup pins each tier holding": (
        3,
        {**Final, "Hierarchy": LookupPinsEachTierHolding},
        {"Hierarchy.lookup"},
    ),
    "retrieve unrefs promoted chunks only": (
        3,
        {**Final, "Hierarchy": RetrieveUnrefsPromotedOnly},
        {"Hierarchy.retrieve"},
    ),
    "store writes one victim down": (
        3,
        {**Final, "Hierarchy": StoreCascadesOneVictim},
        {"Hierarchy.store"},
    ),
    "pin refuses a referenced chunk": (1, PinRefusesReferenced, {"pin"}),
    "held bytes at the first chunk's size": (
        3,
        {**Final, "Hierarchy": HeldBytesOfTheFirstSize},
        {"Hierarchy.held_bytes"},
    ),
    "victims from the back of the order": (2, VictimsFromTheBack, {"_choose_victims"}),
    "a chunk of exactly the capacity refused": (1, TooLargeAtCapacity, {"put"}),
    "put returns the evicted keys": (2, PutReturnsEvictedKeys, {"put"}),
    "victims dropped before the write": (2, DropsVictimsBeforeWriting, {"put"}),
    "lookup says tier 0": (3, {**Final, "Hierarchy": LookupSaysTopTier}, {"Hierarchy.lookup"}),
    "recompute at one FLOP per parameter": (
        4,
        {**Final, "Hierarchy": RecomputeOneFlopPerParameter},
        {"Hierarchy.recompute_seconds"},
    ),
    "load over the disk link": (
        4,
        {**Final, "Hierarchy": LoadOverTheDiskLink},
        {"Hierarchy.load_seconds"},
    ),
    "worth loading over the host link": (
        4,
        {**Final, "Hierarchy": WorthLoadingOverTheHostLink},
        {"Hierarchy.worth_loading"},
    ),
    "retrieve never promotes": (
        3,
        {**Hierarchical, "Hierarchy": RetrieveWithoutPromotion},
        {"Hierarchy.retrieve"},
    ),
    "no victims taken for no room": (2, PutTakesNoVictimsForNoRoom, {"put"}),
    "a retrieve unpins before it promotes": (
        3,
        {**Final, "Hierarchy": UnpinBeforePromoting},
        {"Hierarchy.retrieve"},
    ),
    "a tie is worth loading": (4, {**Final, "Hierarchy": LoadOnATie}, {"Hierarchy.worth_loading"}),
    "a cascade adds a lower miss": (
        3,
        {**Final, "Hierarchy": CascadeAddsNone},
        {"Hierarchy._cascade"},
    ),
    "promotion only below the CPU size": (
        3,
        {**Final, "Hierarchy": PromoteOnlySmaller},
        {"Hierarchy.retrieve"},
    ),
    "remove tries the hold before the chunk": (1, RemoveTriesTheHoldFirst, {"remove"}),
    "victims past an exact fit": (2, VictimsPastAnExactFit, {"_choose_victims"}),
}
