"""Checkpoints of the 'weight-cache' course notebook: its solution, step by step.

Generated from solutions/01_weight_cache_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('weight-cache', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


from collections import OrderedDict
from servelab.units import format_bytes
from servelab.viz import render_cache
from servelab.weights import EntryPinned, EntryTooLarge, PinnedCapacityExceeded


class CacheSkeleton:
    """The data layout and a read-only view of it; the steps below add the behaviour."""

    def __init__(self, capacity_bytes):
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int):
            raise TypeError(f"capacity_bytes must be an int number of bytes, got {capacity_bytes!r}")
        if capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
        self.capacity = capacity_bytes
        self._entries = OrderedDict()  # key -> (size, value), least recently used first
        self._pins = {}  # key -> number of replicas serving from it
        self._used = 0  # bytes held by resident entries
        self.hits = self.misses = self.evictions = self.evicted_bytes = 0

    # --- inspection: reads only, never changes recency ---
    @property
    def used(self):
        return self._used

    def keys(self):
        """Resident keys, least recently used first, pinned ones included."""
        return list(self._entries)

    def size_of(self, key):
        return self._entries[key][0]

    def pin_count(self, key):
        return self._pins.get(key, 0)

    def eviction_order(self):
        """Unpinned keys, next victim first."""
        return [key for key in self._entries if not self._pins.get(key)]

    def __repr__(self):
        return (
            f"{type(self).__name__}({format_bytes(self._used)} of {format_bytes(self.capacity)}: "
            f"{self.keys()})"
        )

    def _repr_svg_(self):
        return render_cache(self)


class SizedCache(CacheSkeleton):
    def get(self, key):
        """The value stored under `key`, now the most recently used; None on a miss."""
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key][1]

    def put(self, key, value, size):
        """Store `value` under `key`, taking `size` bytes of the budget."""
        if key in self._entries:  # a replacement: release the old size first
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        self._entries[key] = (size, value)
        self._used += size


class EvictingCache(SizedCache):
    def put(self, key, value, size):
        """Store `value` under `key`, evicting least recently used entries until it fits."""
        if key in self._entries:  # a replacement: release the old size first
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size

    def _next_victim(self):
        """The key to evict next."""
        return next(iter(self._entries))

    def _evict(self, key):
        """Remove `key` to make room, returning its bytes to the budget."""
        size, _ = self._entries.pop(key)
        self._used -= size


class PinningCache(EvictingCache):
    def pin(self, key):
        """One more replica serves from `key`: it must not be evicted. Returns the pin count."""
        self._pins[key] = self._pins.get(key, 0) + 1
        return self._pins[key]

    def unpin(self, key):
        """One replica of `key` drained. Returns the pins left."""
        left = self._pins[key] - 1
        if left:
            self._pins[key] = left
        else:
            del self._pins[key]
        return left

    def _next_victim(self):
        """The least recently used entry that no replica has pinned; None if there is none."""
        for key in self._entries:
            if not self._pins.get(key):
                return key
        return None


class CheckedCache(PinningCache):
    def put(self, key, value, size):
        """Check with `_check_can_admit` first; then store as before (`super().put(...)`)."""
        self._check_can_admit(key, size)
        return super().put(key, value, size)

    def _check_can_admit(self, key, size):
        """Raise the error that explains why `key` cannot be admitted at `size` bytes."""
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int number of bytes, got {size!r}")
        if size > self.capacity:
            raise EntryTooLarge(
                f"{key!r} is {format_bytes(size)}, larger than the whole "
                f"{format_bytes(self.capacity)} cache: no eviction can admit it"
            )
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned x{self._pins[key]}; unpin it before replacing it")
        pinned = [k for k in self._entries if self._pins.get(k)]
        pinned_bytes = sum(self._entries[k][0] for k in pinned)
        if size > self.capacity - pinned_bytes:
            raise PinnedCapacityExceeded(
                f"cannot admit {key!r} ({format_bytes(size)}): {format_bytes(pinned_bytes)} of "
                f"the {format_bytes(self.capacity)} cache is pinned by {pinned}; retry when a "
                f"replica drains, or place the model on another node"
            )

    def pin(self, key):
        """KeyError if `key` is not resident; otherwise pin as before (`super().pin(key)`)."""
        if key not in self._entries:
            raise KeyError(f"cannot pin {key!r}: it is not in the cache")
        return super().pin(key)

    def unpin(self, key):
        """ValueError if `key` is not pinned; otherwise unpin as before."""
        if not self._pins.get(key):
            raise ValueError(f"{key!r} is not pinned: unpin() without a matching pin()")
        return super().unpin(key)


class WeightCache(CheckedCache):
    def get(self, key):
        """Count a hit or a miss, then answer as before (`super().get(key)`)."""
        if key in self._entries:
            self.hits += 1
        else:
            self.misses += 1
        return super().get(key)

    def _evict(self, key):
        """Count the eviction and the bytes it frees, then evict as before."""
        self.evictions += 1
        self.evicted_bytes += self._entries[key][0]
        super()._evict(key)


TOPIC = 'weight-cache'
STEPS = {
    1: lambda: SizedCache,
    2: lambda: EvictingCache,
    3: lambda: PinningCache,
    4: lambda: CheckedCache,
    5: lambda: WeightCache,
}
