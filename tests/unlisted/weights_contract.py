"""Weight-cache slips against rules the notebook states outright: the exception types of
`unpin` and `put`, and the order in which `_check_can_admit` tries its errors."""

from servelab import checkpoint
from servelab.weights import EntryPinned, EntryTooLarge, PinnedCapacityExceeded

TOPIC = "weight-cache"
Checked = checkpoint(TOPIC, 4)


class UnpinRaisesKeyError(Checked):
    """An unmatched unpin raises KeyError, as a dictionary lookup would, not ValueError."""

    def unpin(self, key):
        if not self._pins.get(key):
            raise KeyError(key)
        return super().unpin(key)


class SizeSignOnly(Checked):
    """Checks the sign of the size but not its type: 2.5 bytes is admitted."""

    def _check_can_admit(self, key, size):
        if size <= 0:
            raise ValueError(f"size must be positive, got {size!r}")
        super()._check_can_admit(key, int(size) or 1)


class PinnedBytesBeforeKey(Checked):
    """Tries the pinned bytes before the pinned key: a pinned key that would not fit beside
    the pins reads PinnedCapacityExceeded, where EntryPinned comes first."""

    def _check_can_admit(self, key, size):
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if size > self.capacity:
            raise EntryTooLarge(f"{key!r} is larger than the whole cache")
        pinned = [k for k in self._entries if self._pins.get(k)]
        if size > self.capacity - sum(self._entries[k][0] for k in pinned):
            raise PinnedCapacityExceeded(f"cannot admit {key!r}: pinned by {pinned}")
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned")


class UnpinOfAbsentReturnsZero(Checked):
    """Checks the pins of resident keys only: unpin of a key that is not in the cache returns
    0, where a key that is not resident is not pinned either (ValueError)."""

    def unpin(self, key):
        if key not in self._entries:
            return 0
        return super().unpin(key)


class PinnedBeforeBadSize(Checked):
    """Tries the pinned key before the size: a pinned key put with size 0 reads EntryPinned,
    where the bad size (ValueError) comes first."""

    def _check_can_admit(self, key, size):
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned")
        super()._check_can_admit(key, size)


class BoolSizeAccepted(Checked):
    """Forgets that a bool is an int to isinstance: a size of True is admitted as 1 byte."""

    def _check_can_admit(self, key, size):
        super()._check_can_admit(key, 1 if size is True else size)


class PinnedBeforeTooLarge(Checked):
    """Tries the pinned key before the whole cache's size: a pinned key put with more bytes
    than the cache reads EntryPinned, where EntryTooLarge comes first."""

    def _check_can_admit(self, key, size):
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int number of bytes, got {size!r}")
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned x{self._pins[key]}")
        if size > self.capacity:
            raise EntryTooLarge(f"{key!r} is larger than the whole cache")
        pinned = [k for k in self._entries if self._pins.get(k)]
        if size > self.capacity - sum(self._entries[k][0] for k in pinned):
            raise PinnedCapacityExceeded(f"cannot admit {key!r}: {pinned} are pinned")


MISTAKES = {
    "unmatched unpin raises KeyError": (4, UnpinRaisesKeyError, {"unpin"}),
    "a size checked for its sign only": (4, SizeSignOnly, {"_check_can_admit"}),
    "the pinned bytes checked before the key": (4, PinnedBytesBeforeKey, {"_check_can_admit"}),
    "unpin of an absent key returns 0": (4, UnpinOfAbsentReturnsZero, {"unpin"}),
    "a pinned key tried before a bad size": (4, PinnedBeforeBadSize, {"_check_can_admit"}),
    "a size of True accepted": (4, BoolSizeAccepted, {"_check_can_admit"}),
    "a pinned key tried before the cache's size": (4, PinnedBeforeTooLarge, {"_check_can_admit"}),
}
