"""KV offload slips at the edges no earlier program visited: an absent chunk, no tokens, a
load at its break-even point, the files a disk tier leaves behind."""

import os
import shutil

from servelab import checkpoint
from servelab.kv.offload.errors import ChunkInUse, ChunkNotPinned, ChunkNotReferenced

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)
Final = checkpoint(TOPIC, 4)


class CanEvictAtMostOneReference(Pinned):
    """Step 1, can_evict: `ref_count(key) <= 1`: an absent chunk (ref_count 0) is evictable."""

    def can_evict(self, key):
        return self.pin_count(key) == 0 and self.ref_count(key) <= 1


class UnpinCountsBeforeResidence(Pinned):
    """Step 1, unpin: tests the pins before residency: an absent chunk raises ChunkNotPinned."""

    def unpin(self, key):
        left = self._pins.get(key, 0) - 1
        if left < 0:
            raise ChunkNotPinned(f"{key!r} is not pinned")
        self._resident(key, "unpin")
        if left:
            self._pins[key] = left
        else:
            del self._pins[key]
        return left


class UnrefCountsBeforeResidence(Pinned):
    """Step 1, unref: tests the references before residency: an absent chunk raises
    ChunkNotReferenced."""

    def unref(self, key):
        left = self._refs.get(key, 0) - 1
        if left < 0:
            raise ChunkNotReferenced(f"{key!r} has only the tier's own reference")
        self._resident(key, "unref")
        if left:
            self._refs[key] = left
        else:
            del self._refs[key]
        return self.ref_count(key)


class RemoveRefusesOnlyReferenced(Pinned):
    """Step 1, remove: refuses only a chunk a transfer reads (ref_count > 1): a chunk a lookup
    pinned is removed under it."""

    def remove(self, key):
        self._resident(key, "remove")
        if self.ref_count(key) > 1:
            raise ChunkInUse(f"{key!r} is referenced")
        self._discard(key)


def _discard_keeping_the_copy(self, key):
    """Step 1, _discard: frees the bytes and the key, never the copy (no `_drop`)."""
    self._used -= self._sizes.pop(key)


TierKeepsCopies = type("Tier", (Final["Tier"],), {"_discard": _discard_keeping_the_copy})
DiskKeepsFiles = type("DiskTier", (Final["DiskTier"],), {"_discard": _discard_keeping_the_copy})


class WriteCopiesTheTemporary(Final["DiskTier"]):
    """Step 3, DiskTier._write: copies the temporary file to the chunk's name and never
    removes it: every chunk leaves a .tmp file behind."""

    def _write(self, key, payload):
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        shutil.copyfile(temporary, final)
        return final


class LoadAtLeastOneRequest(Final["Hierarchy"]):
    """Step 4, load_seconds: at least one chunk request: a load of 0 tokens pays a latency."""

    def load_seconds(self, tokens, tier):
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = max(1, -(-tokens // self.chunk_tokens))
        return chunks * link.latency_s + tokens * kv_bytes / link.bandwidth


class WorthLoadingWholeChunks(Final["Hierarchy"]):
    """Step 4, worth_loading: prices the load of whole chunks (the tokens rounded up to a
    multiple of chunk_tokens) against recomputing the tokens."""

    def worth_loading(self, tokens, tier):
        whole = -(-tokens // self.chunk_tokens) * self.chunk_tokens
        return self.load_seconds(whole, tier) < self.recompute_seconds(tokens)


class WorthLoadingInMilliseconds(Final["Hierarchy"]):
    """Step 4, worth_loading: compares the two times rounded to whole milliseconds: a short
    prefix ties at 0 ms and is not worth loading."""

    def worth_loading(self, tokens, tier):
        load, again = self.load_seconds(tokens, tier), self.recompute_seconds(tokens)
        return round(load * 1000) < round(again * 1000)


MISTAKES = {
    "an absent chunk evictable": (1, CanEvictAtMostOneReference, {"can_evict"}),
    "remove of a pinned chunk": (1, RemoveRefusesOnlyReferenced, {"remove"}),
    "unpin of an absent chunk not pinned": (1, UnpinCountsBeforeResidence, {"unpin"}),
    "unref of an absent chunk not referenced": (1, UnrefCountsBeforeResidence, {"unref"}),
    "a discarded chunk keeps its file": (
        3,
        {**Final, "Tier": TierKeepsCopies, "DiskTier": DiskKeepsFiles},
        {"_discard", "DiskTier._discard"},
    ),
    "a temporary file left behind": (
        3,
        {**Final, "DiskTier": WriteCopiesTheTemporary},
        {"DiskTier._write"},
    ),
    "a load of no tokens pays a latency": (
        4,
        {**Final, "Hierarchy": LoadAtLeastOneRequest},
        {"Hierarchy.load_seconds"},
    ),
    "worth loading in whole milliseconds": (
        4,
        {**Final, "Hierarchy": WorthLoadingInMilliseconds},
        {"Hierarchy.worth_loading"},
    ),
    "worth loading priced at whole chunks": (
        4,
        {**Final, "Hierarchy": WorthLoadingWholeChunks},
        {"Hierarchy.worth_loading"},
    ),
}
