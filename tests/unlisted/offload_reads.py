"""KV offload slips in a hierarchy's reads: where held_bytes takes a chunk's size, the order a
retrieve returns its payloads in, the tier a lookup pins a chunk in."""

import os

from servelab import checkpoint

TOPIC = "kv-offload"
Staged = checkpoint(TOPIC, 3)
Hierarchy = Staged["Hierarchy"]


class HeldBytesTopSizes(Hierarchy):
    """Step 3, held_bytes: every distinct chunk's size taken from the cpu tier, whichever tier
    holds it: a chunk only the disk tier holds raises KeyError."""

    def held_bytes(self):
        keys = set()
        for tier in self.tiers:
            keys.update(tier.keys())
        return sum(self.tiers[0].size_of(k) for k in keys)


class HeldBytesTopDict(Hierarchy):
    """Step 3, held_bytes: reads the cpu tier's size dict itself (no size_of call) for every
    chunk: the same KeyError, where no tier was asked through size_of."""

    def held_bytes(self):
        keys = set()
        for tier in self.tiers:
            keys.update(tier.keys())
        return sum(self.tiers[0]._sizes[k] for k in keys)


def _retrieve(h, found, order):
    payloads = {}
    for key, i in found:
        h.tiers[i].ref(key)
        payloads[key] = h.tiers[i].get(key)
    top = h.tiers[0]
    for key, i in found:
        payload = payloads[key]
        if i > 0 and key not in top and len(payload) <= top.capacity:
            evicted = top.put(key, payload)
            if evicted:
                h._cascade(1, evicted)
    for key, i in found:
        h.tiers[i].unref(key)
        h.tiers[i].unpin(key)
    return [payloads[key] for key, _ in order(found)]


class RetrieveTierOrder(Hierarchy):
    """Step 3, retrieve: the payloads returned tier by tier, the cpu tier's chunks first."""

    def retrieve(self, found):
        return _retrieve(self, found, lambda f: sorted(f, key=lambda e: e[1]))


class RetrieveReversed(Hierarchy):
    """Step 3, retrieve: the payloads returned last found first."""

    def retrieve(self, found):
        return _retrieve(self, found, lambda f: f[::-1])


class RetrieveFirstTwice(Hierarchy):
    """Step 3, retrieve: the first chunk's payload returned in the second one's place."""

    def retrieve(self, found):
        return _retrieve(self, found, lambda f: [f[0], *f[:1], *f[2:]] if len(f) > 1 else f)


class LookupPinsLastHolder(Hierarchy):
    """Step 3, lookup: returns the first tier holding each chunk but pins the last one: a chunk
    in both tiers is pinned on disk only."""

    def lookup(self, keys):
        found = []
        for key in keys:
            holders = [i for i, t in enumerate(self.tiers) if key in t]
            if not holders:
                break
            self.tiers[holders[-1]].pin(key)
            found.append((key, holders[0]))
        return found


class WriteAgainUnderTheFinalName(Staged["DiskTier"]):
    """Step 3, DiskTier._write: a whole temporary file, then the payload written again under
    the chunk's own name (no os.replace): a crash in that second write tears the chunk."""

    def _write(self, key, payload):
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(payload)
        with open(final, "wb") as f:
            f.write(payload)
        os.remove(temporary)
        return final


class ReleaseInTheCpuTierFirst(Hierarchy):
    """Step 3, release: unpins a chunk in the cpu tier whenever it holds a pinned copy there,
    whatever tier the lookup found it in."""

    def release(self, found):
        for key, i in found:
            if key in self.tiers[0] and self.tiers[0].pin_count(key):
                self.tiers[0].unpin(key)
            else:
                self.tiers[i].unpin(key)


def _at3(cls, method):
    return (3, {**Staged, "Hierarchy": cls}, {f"Hierarchy.{method}"})


MISTAKES = {
    "held_bytes takes every size from the cpu tier": _at3(HeldBytesTopSizes, "held_bytes"),
    "held_bytes reads the cpu tier's sizes dict": _at3(HeldBytesTopDict, "held_bytes"),
    "payloads returned tier by tier": _at3(RetrieveTierOrder, "retrieve"),
    "payloads returned last found first": _at3(RetrieveReversed, "retrieve"),
    "the first payload returned twice": _at3(RetrieveFirstTwice, "retrieve"),
    "a chunk pinned in the last tier holding it": _at3(LookupPinsLastHolder, "lookup"),
    "a chunk written again under its final name": (
        3,
        {**Staged, "DiskTier": WriteAgainUnderTheFinalName},
        {"DiskTier._write"},
    ),
    "a release in the cpu tier first": _at3(ReleaseInTheCpuTierFirst, "release"),
}
