"""WeightCache: model weights on a node, under a byte budget, with reference-counted pins.

Two things separate it from a textbook LRU, and they decide the design:

* **Bytes, not a count.** A 7B model is ~14 GB and a 70B one ~140 GB, so "four entries" means
  anything from 56 GB to 560 GB. The budget is bytes, and admitting one large model may take
  several evictions, so eviction is a loop that runs until the new entry fits.
* **Entries in use.** A replica serving from a model holds it mapped; evicting it underneath is a
  crash, not a slow path. Replicas pin what they serve; pinned entries are never victims. Pins
  are counted, because two replicas can serve one model.

Two failures raise, and neither is ever reported as a miss: :class:`EntryTooLarge` (a
``ValueError``: no eviction can ever admit it; a configuration error) and
:class:`PinnedCapacityExceeded` (a ``MemoryError``: it would fit, but too much is pinned right
now; wait for a replica to drain or place it elsewhere). Admission is decided *before* anything
is evicted, so every error leaves the cache exactly as it was.

Replacing a pinned key raises :class:`EntryPinned`: swapping the bytes a replica is reading is
the same bug as evicting them. Replacing an unpinned key releases its old size first.

All public methods take one (non-reentrant) lock, since a replica pins and unpins from its own
thread. It is a :class:`~servelab.weights.lock.TokenLock`: the lock is most of the cost of a
hit, and that one costs a third of a ``threading.Lock``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from servelab.units import format_bytes
from servelab.weights.lock import TokenLock
from servelab.weights.policies import LRU, EvictionPolicy

K = TypeVar("K", bound=Hashable)

__all__ = [
    "CacheStats",
    "EntryPinned",
    "EntryTooLarge",
    "InvalidSize",
    "NotPinned",
    "NotResident",
    "PinnedCapacityExceeded",
    "WeightCache",
    "WeightCacheError",
]


class WeightCacheError(Exception):
    """Base of every error the weight cache raises."""


class EntryTooLarge(WeightCacheError, ValueError):
    """Permanent: the entry is larger than the whole cache, so no eviction can admit it."""


class PinnedCapacityExceeded(WeightCacheError, MemoryError):
    """Transient: the entry would fit in the budget, but too much of it is pinned right now."""


class EntryPinned(WeightCacheError, RuntimeError):
    """The key is pinned by a replica, so its bytes cannot be replaced under it."""


class NotResident(WeightCacheError, KeyError):
    """The key is not in the cache (``pin`` needs a resident entry)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class NotPinned(WeightCacheError, ValueError):
    """``unpin`` was called more times than ``pin`` for this key."""


class InvalidSize(WeightCacheError, ValueError):
    """A size or capacity that is not a positive whole number of bytes."""


@dataclass(frozen=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    evicted_bytes: int = 0

    @property
    def hit_ratio(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


_MISSING = object()


def _check_bytes(what: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidSize(f"{what} must be an int number of bytes, got {n!r}")
    if n <= 0:
        raise InvalidSize(f"{what} must be positive, got {n}")
    return n


class WeightCache(Generic[K]):
    """Size-aware cache of model weights with reference-counted pinning.

    ``capacity_bytes`` is a budget in bytes. ``policy`` chooses victims among unpinned entries
    (LRU by default).
    """

    def __init__(self, capacity_bytes: int, policy: EvictionPolicy[K] | None = None) -> None:
        self.capacity: int = _check_bytes("capacity_bytes", capacity_bytes)
        self.policy: EvictionPolicy[K] = policy if policy is not None else LRU()
        if len(self.policy):
            raise ValueError("the eviction policy must start empty")
        # Three plain dicts instead of an entry object: a hit is one dict lookup.
        self._values: dict[K, Any] = {}
        self._sizes: dict[K, int] = {}
        self._pins: dict[K, int] = {}  # pinned keys only
        self._used = 0
        self._pinned_bytes = 0  # changes on pin/unpin only, so a put touches one byte counter
        self._hits = self._misses = self._evictions = self._evicted_bytes = 0
        self._lock = TokenLock()
        self._token = self._lock.token  # get() and put() take the lock inline (see TokenLock)
        # The policy's cheapest callables for the two hot events, bound once.
        self._touch = self.policy.hit_hook()
        self._admit = self.policy.put_hook()
        self._pop_victim = self.policy.pop_victim

    # --- the learner API: get / put / pin / unpin ---------------------------------------

    def get(self, key: K) -> Any | None:
        """The value for ``key`` (refreshing its recency), or None on a miss."""
        try:  # take the lock: one list operation unless another thread holds it
            self._token.pop()
        except IndexError:
            self._lock.wait()
        try:
            value = self._values.get(key, _MISSING)
            if value is _MISSING:
                self._misses += 1
                return None
            self._hits += 1
            touch = self._touch
            if touch is not None:
                try:
                    touch(key)  # LRU: OrderedDict.move_to_end, no Python frame
                except KeyError:  # the fast hook cannot handle this key (parked by a pin)
                    self.policy.update_on_hit(key)
            return value
        finally:
            self._token.append(None)

    def put(self, key: K, value: Any, size: int) -> list[K]:
        """Admit ``key`` at ``size`` bytes, evicting until it fits; returns the evicted keys.

        Raises :class:`EntryTooLarge`, :class:`PinnedCapacityExceeded`, :class:`EntryPinned`
        or :class:`InvalidSize`; after any of them the cache is unchanged.
        """
        if type(size) is not int or size <= 0:
            _check_bytes("size", size)
        try:  # take the lock, as in get()
            self._token.pop()
        except IndexError:
            self._lock.wait()
        try:
            sizes, values = self._sizes, self._values
            if key in sizes or size > self.capacity - self._pinned_bytes:
                self._check_admission(key, size)  # raises before anything changes
                if key in sizes:  # replacing: release the old size first (not an eviction)
                    self._drop(key)
                    self.policy.update_on_remove(key)
            used = self._used + size
            if used > self.capacity:  # evict; victims are unpinned: admission checked it
                pop_victim, capacity = self._pop_victim, self.capacity
                victim = pop_victim()
                evicted = [victim]
                freed = sizes.pop(victim)
                del values[victim]
                while used - freed > capacity:
                    victim = pop_victim()
                    evicted.append(victim)
                    freed += sizes.pop(victim)
                    del values[victim]
                used -= freed
                self._evictions += len(evicted)
                self._evicted_bytes += freed
            else:
                evicted = []
            values[key] = value
            sizes[key] = size
            self._used = used
            admit = self._admit  # a local call specializes; an attribute call would not
            admit(key, size)
            return evicted
        finally:
            self._token.append(None)

    def _check_admission(self, key: K, size: int) -> None:
        """Raise if ``key`` cannot be admitted at ``size`` bytes (the rare path of put())."""
        if size > self.capacity:
            raise EntryTooLarge(
                f"{key!r} is {format_bytes(size)}, larger than the whole "
                f"{format_bytes(self.capacity)} cache: no eviction can admit it. Raise the "
                f"budget or do not place this model on this node."
            )
        if key in self._pins:
            raise EntryPinned(
                f"{key!r} is pinned {self._pins[key]}x by running replicas; unpin it "
                f"before replacing its weights"
            )
        reclaimable = self.capacity - self._pinned_bytes
        if size > reclaimable:
            raise PinnedCapacityExceeded(
                f"cannot admit {key!r} ({format_bytes(size)}): "
                f"{format_bytes(self._pinned_bytes)} of the "
                f"{format_bytes(self.capacity)} cache is pinned by {list(self._pins)!r}, so "
                f"at most {format_bytes(reclaimable)} can be freed. Retry after a replica "
                f"unpins, or place the model on another node."
            )

    def _drop(self, key: K) -> None:
        """Forget an unpinned entry's bytes (the policy is told by the caller)."""
        self._used -= self._sizes.pop(key)
        del self._values[key]

    def pin(self, key: K) -> int:
        """Mark ``key`` in use by one more replica; returns its pin count."""
        return self._pin(key)[1]

    def _pin(self, key: K) -> tuple[Any, int]:
        with self._lock:
            self._resident(key, "pin")
            pins = self._pins.get(key, 0) + 1
            self._pins[key] = pins
            if pins == 1:
                self._pinned_bytes += self._sizes[key]
                self.policy.update_on_pin(key)
            return self._values[key], pins

    def unpin(self, key: K) -> int:
        """Release one replica's pin; returns the remaining count. Never below zero."""
        with self._lock:
            self._resident(key, "unpin")
            pins = self._pins.get(key, 0)
            if pins == 0:
                raise NotPinned(f"{key!r} is not pinned: unpin() without a matching pin()")
            if pins > 1:
                self._pins[key] = pins - 1
            else:
                del self._pins[key]
                self._pinned_bytes -= self._sizes[key]
                self.policy.update_on_unpin(key)
            return pins - 1

    @contextmanager
    def pinned(self, key: K) -> Iterator[Any]:
        """Hold a pin for a replica's lifetime: ``with cache.pinned(k) as weights: ...``."""
        value = self._pin(key)[0]
        try:
            yield value
        finally:
            self.unpin(key)

    def remove(self, key: K) -> None:
        """Drop an unpinned entry on purpose (not counted as an eviction)."""
        with self._lock:
            self._resident(key, "remove")
            if key in self._pins:
                raise EntryPinned(
                    f"{key!r} is pinned {self._pins[key]}x; unpin it before removing it"
                )
            self._drop(key)
            self.policy.update_on_remove(key)

    def _resident(self, key: K, action: str) -> None:
        if key not in self._sizes:
            raise NotResident(f"cannot {action} {key!r}: it is not in the cache")

    # --- inspection: none of these changes recency ---------------------------------------

    @property
    def used(self) -> int:
        """Bytes held by resident entries."""
        return self._used

    @property
    def free(self) -> int:
        return self.capacity - self._used

    @property
    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, self._evicted_bytes)

    def __contains__(self, key: object) -> bool:
        return key in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    def size_of(self, key: K) -> int:
        with self._lock:
            self._resident(key, "size")
            return self._sizes[key]

    def pin_count(self, key: K) -> int:
        """Pins held on ``key``; 0 for an unpinned or absent key."""
        return self._pins.get(key, 0)

    def pinned_keys(self) -> list[K]:
        with self._lock:
            return list(self._pins)

    def eviction_order(self) -> list[K]:
        """Unpinned keys, next victim first."""
        with self._lock:
            return self.policy.eviction_order()

    def keys(self) -> list[K]:
        """Every resident key, least recently used (or next in the policy's order) first.

        Pinned keys sit where their history puts them; for policies without a total order of
        pinned keys (most of them besides LRU/FIFO) they follow the candidates.
        """
        with self._lock:
            history = getattr(self.policy, "history_order", None)
            if history is not None:
                return list(history())
            order = self.policy.eviction_order()
            seen = set(order)
            return order + [k for k in self._sizes if k not in seen]

    def __repr__(self) -> str:
        return (
            f"WeightCache({format_bytes(self._used)} of {format_bytes(self.capacity)}, "
            f"{len(self._sizes)} entries, {len(self._pins)} pinned, "
            f"policy={self.policy.name})"
        )
