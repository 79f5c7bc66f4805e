"""Weight-cache slips in what pin() and unpin() return and where get() leaves its key: a
count over the whole cache returned for one key's, a hit sent to the least recently used
end, a pinned key's hit left where it was."""

from servelab import checkpoint

TOPIC = "weight-cache"
Sized = checkpoint(TOPIC, 1)
Pinning = checkpoint(TOPIC, 3)


class PinReturnsKeysPinned(Pinning):
    """Returns how many keys are pinned, not this key's count."""

    def pin(self, key):
        self._pins[key] = self._pins.get(key, 0) + 1
        return len(self._pins)


class UnpinReturnsPinsLeftEverywhere(Pinning):
    """Returns the pins left on every key together."""

    def unpin(self, key):
        left = self._pins[key] - 1
        if left:
            self._pins[key] = left
        else:
            del self._pins[key]
        return sum(self._pins.values())


class HitToLeastRecent(Sized):
    """`move_to_end(key, last=False)`: a hit makes its key the next victim."""

    def get(self, key):
        if key not in self._entries:
            return None
        self._entries.move_to_end(key, last=False)
        return self._entries[key][1]


class PinnedHitKeepsPlace(Pinning):
    """A hit on a pinned key leaves it where it is."""

    def get(self, key):
        if key not in self._entries:
            return None
        if not self._pins.get(key):
            self._entries.move_to_end(key)
        return self._entries[key][1]


MISTAKES = {
    "pin returns the number of keys pinned": (3, PinReturnsKeysPinned, {"pin"}),
    "unpin returns the pins of every key": (3, UnpinReturnsPinsLeftEverywhere, {"unpin"}),
    "a hit goes to the least recently used end": (1, HitToLeastRecent, {"get"}),
    "a pinned key's hit keeps its place": (3, PinnedHitKeepsPlace, {"get"}),
}
