"""KV offload slips only a program after several calls tells apart: a count taken for a use,
a retrieve that promotes last first, reads a disk copy without a use, or promotes a chunk the
CPU tier holds already or cannot hold at all, a release that unpins where the chunk is now, a
worth_loading that leaves the latency out."""

from servelab import checkpoint

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)
Final = checkpoint(TOPIC, 4)
Hierarchy = Final["Hierarchy"]


class UnrefIsAUse(Pinned):
    """Step 1, unref: moves the chunk to the LRU end, as a use would."""

    def unref(self, key):
        count = super().unref(key)
        if self.policy == "LRU":
            self._sizes.move_to_end(key)
        return count


def _promote(h, read):
    """A retrieve's promotion loop as the slips below write it (the reference's otherwise)."""
    top = h.tiers[0]
    for (key, i), payload in read:
        if i > 0 and key not in top and len(payload) <= top.capacity:
            evicted = top.put(key, payload)
            if evicted:
                h._cascade(1, evicted)


def _finish(h, found):
    for key, i in found:
        h.tiers[i].unref(key)
        h.tiers[i].unpin(key)


class PromoteLastFirst(Hierarchy):
    """Step 3, retrieve: promotes the chunks read from disk in reverse order."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        _promote(self, list(zip(found, payloads, strict=True))[::-1])
        _finish(self, found)
        return payloads


class DiskReadWithoutUse(Hierarchy):
    """Step 3, retrieve: reads a disk copy with `_read`, so the disk tier's LRU order never
    refreshes."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            tier = self.tiers[i]
            payloads.append(tier._read(key) if i else tier.get(key))
        _promote(self, list(zip(found, payloads, strict=True)))
        _finish(self, found)
        return payloads


class PromoteResidentToo(Hierarchy):
    """Step 3, retrieve: promotes a disk hit even when a store has put it in the CPU tier
    since the lookup (a second put there is a use)."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and len(payload) <= top.capacity:
                self._cascade(1, top.put(key, payload) or [])
        _finish(self, found)
        return payloads


class PromoteWithoutSizeCheck(Hierarchy):
    """Step 3, retrieve: promotes a disk hit without asking whether it fits the CPU tier at
    all: a chunk larger than the whole tier makes its put raise ChunkTooLarge."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top:
                self._cascade(1, top.put(key, payload) or [])
        _finish(self, found)
        return payloads


class ReleaseWhereHeldNow(Hierarchy):
    """Step 3, release: unpins in the fastest tier holding the key now, not the one the lookup
    returned."""

    def release(self, found):
        for key, _ in found:
            next(t for t in self.tiers if key in t).unpin(key)


class WorthLoadingWithoutLatency(Hierarchy):
    """Step 4, worth_loading: prices the load as its bytes over the link, latency left out."""

    def worth_loading(self, tokens, tier):
        m, link = self.model, self.links[tier]
        per_token = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        return tokens * per_token / link.bandwidth < self.recompute_seconds(tokens)


MISTAKES = {
    "an unref taken for a use": (1, UnrefIsAUse, {"unref"}),
    "chunks promoted last first": (
        3,
        {**Final, "Hierarchy": PromoteLastFirst},
        {"Hierarchy.retrieve"},
    ),
    "a disk read without a use": (
        3,
        {**Final, "Hierarchy": DiskReadWithoutUse},
        {"Hierarchy.retrieve"},
    ),
    "a chunk the CPU tier holds promoted again": (
        3,
        {**Final, "Hierarchy": PromoteResidentToo},
        {"Hierarchy.retrieve"},
    ),
    "a chunk larger than the CPU tier promoted": (
        3,
        {**Final, "Hierarchy": PromoteWithoutSizeCheck},
        {"Hierarchy.retrieve"},
    ),
    "release unpins where the chunk is now": (
        3,
        {**Final, "Hierarchy": ReleaseWhereHeldNow},
        {"Hierarchy.release"},
    ),
    "worth loading without the latency": (
        4,
        {**Final, "Hierarchy": WorthLoadingWithoutLatency},
        {"Hierarchy.worth_loading"},
    ),
}
