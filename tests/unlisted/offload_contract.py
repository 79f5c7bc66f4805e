"""KV offload slips against rules the notebook states outright: what `pin`, `ref` and their
releases return, and which error class each refusal raises."""

from servelab import checkpoint
from servelab.kv.offload.errors import ChunkNotPinned

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)


class RefReturnsTransfers(Pinned):
    """Returns the transfers' count from `ref`, leaving out the tier's own reference."""

    def ref(self, key):
        self._resident(key, "ref")
        self._refs[key] = self._refs.get(key, 0) + 1
        return self._refs[key]


class UnpinReturnsOldCount(Pinned):
    """Returns the pin count it found, not the pins left."""

    def unpin(self, key):
        self._resident(key, "unpin")
        held = self._pins.get(key, 0)
        if not held:
            raise ChunkNotPinned(f"{key!r} is not pinned")
        if held > 1:
            self._pins[key] = held - 1
        else:
            del self._pins[key]
        return held


class UnrefLetsKeyErrorOut(Pinned):
    """Decrements with `self._refs[key] -= 1`: a chunk with no transfer raises the dict's
    KeyError, not ChunkNotReferenced (the state is unchanged, the class is wrong)."""

    def unref(self, key):
        self._resident(key, "unref")
        self._refs[key] -= 1
        if not self._refs[key]:
            del self._refs[key]
        return self.ref_count(key)


MISTAKES = {
    "ref returns the transfers only": (1, RefReturnsTransfers, {"ref"}),
    "a tier's unpin returns the count it found": (1, UnpinReturnsOldCount, {"unpin"}),
    "unref lets the dict's KeyError out": (1, UnrefLetsKeyErrorOut, {"unref"}),
}
