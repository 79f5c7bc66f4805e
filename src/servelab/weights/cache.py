"""WeightCache: model weights on a node, under a byte budget, with reference-counted pins.

Two things separate it from a textbook LRU, and they decide the design:

* **Bytes, not a count.** A 7B model is ~14 GB and a 70B one ~140 GB. The budget is bytes, and
  admitting one large model may take several evictions: eviction loops until the entry fits.
* **Entries in use.** A replica serving from a model holds its files mapped. Deleting one frees
  no disk space until the last mapping goes (so the budget counts bytes the disk lacks), and a
  file rewritten in place feeds the replica changed weights or kills it with ``SIGBUS``.
  Replicas pin what they serve, counted (two replicas can serve one model); pinned entries are
  never victims.

Two failures raise, never reported as a miss: :class:`EntryTooLarge` (a ``ValueError``: no
eviction can ever admit it) and :class:`PinnedCapacityExceeded` (a ``MemoryError``: too much is
pinned right now). Replacing a pinned key raises :class:`EntryPinned`; replacing an unpinned
one releases its old size first. Admission is decided before anything is evicted, and victims
are chosen before anything is removed (a policy that raises, or names no victim while unpinned
bytes exist, :class:`PolicyInconsistent`, takes its victims back through
:meth:`~servelab.weights.policies.EvictionPolicy.restore_victims`): every error leaves the cache
exactly as it was.

All public methods take one ``threading.Lock``, with ``with``, since a replica pins and unpins
from its own thread; see :meth:`WeightCache.pinned` for what holds when Ctrl-C lands mid-update.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Generic, NoReturn, TypeVar, cast

from servelab.native import mypyc_attr
from servelab.units import format_bytes
from servelab.weights.policies import LRU, EvictionPolicy

K = TypeVar("K", bound=Hashable)

__all__ = [
    "CacheStats",
    "EntryPinned",
    "EntryTooLarge",
    "InvalidPolicy",
    "InvalidSize",
    "NotPinned",
    "NotResident",
    "PinnedCapacityExceeded",
    "PolicyInUse",
    "PolicyInconsistent",
    "WeightCache",
    "WeightCacheError",
]


@mypyc_attr(native_class=False)
class WeightCacheError(Exception):
    """Base of every error the weight cache raises."""


@mypyc_attr(native_class=False)
class EntryTooLarge(WeightCacheError, ValueError):
    """Permanent: the entry is larger than the whole cache, so no eviction can admit it."""


@mypyc_attr(native_class=False)
class PinnedCapacityExceeded(WeightCacheError, MemoryError):
    """Transient: the entry would fit in the budget, but too much of it is pinned right now."""


@mypyc_attr(native_class=False)
class EntryPinned(WeightCacheError, RuntimeError):
    """The key is pinned by a replica, so its bytes cannot be replaced under it."""


@mypyc_attr(native_class=False)
class NotResident(WeightCacheError, KeyError):
    """The key is not in the cache (``pin`` needs a resident entry)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


@mypyc_attr(native_class=False)
class NotPinned(WeightCacheError, ValueError):
    """``unpin`` was called more times than ``pin`` for this key (or it is not resident)."""


@mypyc_attr(native_class=False)
class InvalidSize(WeightCacheError, ValueError):
    """A size or capacity that is not a positive whole number of bytes."""


@mypyc_attr(native_class=False)
class InvalidPolicy(WeightCacheError, TypeError):
    """The ``policy`` argument is not an eviction policy (it lacks the policy's methods)."""


@mypyc_attr(native_class=False)
class PolicyInUse(WeightCacheError, ValueError):
    """The policy already holds keys, or already decides for another cache."""


@mypyc_attr(native_class=False)
class PolicyInconsistent(WeightCacheError, RuntimeError):
    """The policy contradicted the cache: no victim although unpinned entries remain, or a
    victim that is pinned, absent or named twice. The cache is left unchanged."""


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

_POLICY_METHODS = (
    "update_on_put",
    "update_on_hit",
    "update_on_remove",
    "update_on_pin",
    "update_on_unpin",
    "pop_victim",
    "eviction_order",
    "__len__",
)  # the hooks, undo_log and restore_victims default to EvictionPolicy's


@mypyc_attr(native_class=False)  # compiled, a plain Python class: weakly referenced
class _Owner:
    """A cache's claim on its policy: the cache alone holds it, so it goes with the cache."""

    __slots__ = ("__weakref__", "policy")

    def __init__(self, policy: object) -> None:
        self.policy = policy


# Each policy's claim by id, weakly held: it goes with its cache (a native cache has no weakref).
_OWNERS: weakref.WeakValueDictionary[int, _Owner] = weakref.WeakValueDictionary()
_OWNERS_LOCK = threading.Lock()


def _compiled_attributes(policy: object) -> list[str]:
    """A compiled policy's attributes, kept in the instance, not a ``__dict__`` (else empty)."""
    names = getattr(type(policy), "__mypyc_attrs__", ())
    return [name for name in names if name != "__dict__"]


def _attributes(policy: object) -> dict[str, Any] | None:
    """The policy's attributes (compiled ones and ``__dict__``), or None if unlistable."""
    state = {n: getattr(policy, n) for n in _compiled_attributes(policy) if hasattr(policy, n)}
    own = getattr(policy, "__dict__", None)
    if own is None:
        return state or None
    state.update(own)
    return state


def _policy_state(policy: object, keys: Mapping[Any, object]) -> dict[str, Any] | None:
    """A copy of the policy's attributes (keys are shared, not copied), or None if impossible."""
    state = _attributes(policy)
    if state is None:
        return None
    try:
        saved: dict[str, Any] = copy.deepcopy(state, {id(k): k for k in keys})
        return saved
    except Exception:  # something in it cannot be copied
        return None


def _restore_policy_state(policy: object, state: dict[str, Any]) -> None:
    compiled = _compiled_attributes(policy)
    for name in compiled:
        if name in state:
            setattr(policy, name, state[name])
    own = getattr(policy, "__dict__", None)
    if own is not None:
        own.clear()
        own.update({name: value for name, value in state.items() if name not in compiled})


def _check_bytes(what: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidSize(f"{what} must be an int number of bytes, got {n!r}")
    if n <= 0:
        raise InvalidSize(f"{what} must be positive, got {n}")
    return n


class _Pinned(Generic[K]):
    """The context manager of :meth:`WeightCache.pinned`: a pin per ``with`` block it is in."""

    __slots__ = ("_cache", "_key", "held")

    def __init__(self, cache: WeightCache[K], key: K) -> None:
        self._cache = cache
        self._key = key
        self.held = 0  # pins taken through this handle: changed by the cache with the pin count

    def __enter__(self) -> Any:
        ticket = None
        try:
            ticket = _Ticket(self)
            return self._cache._pin(self._key, ticket)[0]
        except BaseException:  # an interrupt after the pin was taken: give it back
            # ``ticket`` is None when the interrupt came before it existed: nothing taken
            if ticket is not None and ticket.done:
                self._cache._unpin(self._key, _Ticket(self))
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        ticket = None
        try:
            ticket = _Ticket(self)
            self._cache._unpin(self._key, ticket)
        except BaseException:  # an interrupt on the way to the release: release, then pass it on
            if ticket is None or not ticket.done:
                self._cache._unpin(self._key, _Ticket(self))
            raise


class _Ticket:
    """One pin or release through a handle; ``done`` flips with the pin count, under the lock."""

    __slots__ = ("done", "handle")

    def __init__(self, handle: _Pinned[Any]) -> None:
        self.handle = handle
        self.done = False


# Compiled, a native class (fields as C slots) that Python classes may subclass.
@mypyc_attr(allow_interpreted_subclasses=True)
class WeightCache(Generic[K]):
    """Size-aware cache of model weights with reference-counted pinning.

    ``capacity_bytes`` is a budget in bytes. ``policy`` chooses victims among unpinned entries
    (LRU by default); it must be fresh and belongs to this cache alone.
    """

    def __init__(self, capacity_bytes: object, policy: object = None) -> None:
        # Typed object and checked here: compiled, mypyc would raise a plain TypeError first.
        self.capacity: int = _check_bytes("capacity_bytes", capacity_bytes)
        if policy is None:
            policy = LRU()
        missing = [m for m in _POLICY_METHODS if not callable(getattr(policy, m, None))]
        if missing:
            raise InvalidPolicy(
                f"policy must be an EvictionPolicy; a {type(policy).__name__!r} has no "
                f"{', '.join(missing)}"
            )
        policy = cast("EvictionPolicy[K]", policy)
        if len(policy):
            raise PolicyInUse(
                f"the eviction policy must start empty, but {policy!r} already holds "
                f"{len(policy)} keys; pass a fresh instance"
            )
        with _OWNERS_LOCK:
            owner = _OWNERS.get(id(policy))
            if owner is not None and owner.policy is policy:
                raise PolicyInUse(
                    f"{policy!r} already decides for another WeightCache; a policy tracks one "
                    f"cache's keys, so give each cache its own instance"
                )
            self.policy: EvictionPolicy[K] = policy
            self._owner = _Owner(policy)
            _OWNERS[id(policy)] = self._owner
        # Three plain dicts instead of an entry object: a hit is one dict lookup.
        self._values: dict[K, Any] = {}
        self._sizes: dict[K, int] = {}
        self._pins: dict[K, int] = {}  # pinned keys only
        self._used = 0
        self._pinned_bytes = 0  # changes on pin/unpin only, so a put touches one byte counter
        self._hits = self._misses = self._evictions = self._evicted_bytes = 0
        self._lock = threading.Lock()
        self._bind_policy()

    def _bind_policy(self) -> None:
        """The policy's cheapest callables for the hot events, bound once."""
        policy = self.policy
        hooks = getattr(policy, "hit_hook", None), getattr(policy, "put_hook", None)
        self._touch = hooks[0]() if hooks[0] is not None else policy.update_on_hit
        self._admit = hooks[1]() if hooks[1] is not None else policy.update_on_put
        pop_victims = getattr(policy, "pop_victims", None)
        if pop_victims is None:  # a policy written without the base class: the default loop
            pop_victims = partial(EvictionPolicy.pop_victims, policy)
        self._pop_victims: Callable[[int, Mapping[K, int], list[K]], int] = pop_victims
        undo_log = getattr(policy, "undo_log", None)
        self._undo = undo_log() if undo_log is not None else None

    # --- the learner API: get / put / pin / unpin ---------------------------------------

    def get(self, key: K) -> Any | None:
        """The value for ``key`` (refreshing its recency), or None on a miss."""
        with self._lock:
            value = self._values.get(key, _MISSING)
            if value is _MISSING:
                self._misses += 1
                return None
            touch = self._touch
            if touch is not None:
                try:
                    touch(key)  # LRU: OrderedDict.move_to_end, no Python frame
                except KeyError:  # the fast hook cannot take this key (parked by a pin)
                    self.policy.update_on_hit(key)
            self._hits += 1
            return value

    def put(self, key: K, value: Any, size: object) -> list[K]:
        """Admit ``key`` at ``size`` bytes, evicting until it fits; returns the evicted keys.

        Raises :class:`EntryTooLarge`, :class:`PinnedCapacityExceeded`, :class:`EntryPinned`
        or :class:`InvalidSize`, and passes on what the policy raises; after any of them the
        cache is unchanged.
        """
        if type(size) is not int or size <= 0:
            size = _check_bytes("size", size)
        with self._lock:
            if key in self._sizes:
                return self._put_checked(key, value, size)
            over = self._used + size - self.capacity
            if over <= 0:  # it fits: no admission check needed (pinned bytes are in _used)
                try:
                    self._admit(key, size)
                except BaseException:
                    self._unadmit(key)
                    raise
                # Past the admission, nothing below is a point where CPython delivers an
                # asynchronous exception: the entry is stored whole or not at all.
                self._values[key] = value
                self._sizes[key] = size
                self._used += size
                return []
            if size > self.capacity - self._pinned_bytes:
                return self._put_checked(key, value, size)
            values, sizes = self._values, self._sizes
            victims: list[K] = []
            undo = self._undo
            if undo is not None:
                undo.clear()  # the undo log holds this eviction's pops only
            try:
                try:
                    freed = self._pop_victims(over, sizes, victims)
                except LookupError as err:
                    raise PolicyInconsistent(self._no_victim(err, victims)) from err
                n_victims = len(victims)
                pins = self._pins
                if (
                    freed < over
                    or (pins and not pins.keys().isdisjoint(victims))
                    or (n_victims > 1 and len(set(victims)) != n_victims)
                ):
                    self._reject(victims)  # names the victim that is absent, pinned or repeated
                self._admit(key, size)
            except BaseException:
                self._unadmit(key)
                self._give_back(victims)
                raise
            # The commit: statements CPython does not interrupt, then the victims' deletions.
            values[key] = value
            sizes[key] = size
            self._used += size - freed
            self._evictions += n_victims
            self._evicted_bytes += freed
            try:
                for victim in victims:
                    del values[victim], sizes[victim]
            except BaseException:  # an interrupt between two victims: finish, then pass it on
                self._drop(victims)
                raise
            return victims

    def _choose_victims(self, over: int, victims: list[K]) -> int:
        """Append victims to ``victims`` until ``over`` bytes are freed; returns the bytes freed.

        Nothing is removed here; the caller gives the victims back to the policy if this or
        anything after it raises. A policy that names no victim although unpinned bytes
        remain, or names a pinned, absent or repeated key, raises :class:`PolicyInconsistent`.
        """
        try:
            freed = self._pop_victims(over, self._sizes, victims)
        except LookupError as err:
            raise PolicyInconsistent(self._no_victim(err, victims)) from err
        pins = self._pins
        if (
            freed < over
            or len(set(victims)) != len(victims)
            or (pins and not pins.keys().isdisjoint(victims))
        ):
            self._reject(victims)
        return freed

    def _drop(self, victims: list[K]) -> None:
        """Finish deleting evicted entries (some may be gone already)."""
        values, sizes = self._values, self._sizes
        for victim in victims:
            values.pop(victim, None)
            sizes.pop(victim, None)

    def _reject(self, victims: list[K]) -> NoReturn:
        """Raise PolicyInconsistent naming the first victim that cannot be evicted."""
        seen: set[K] = set()
        for victim in victims:
            if victim not in self._sizes:
                why = "which is not in the cache"
            elif victim in self._pins:
                why = "which is pinned"
            elif victim in seen:
                why = "twice in one eviction"
            else:
                seen.add(victim)
                continue
            raise PolicyInconsistent(self._inconsistent(f"named {victim!r} as a victim, {why}"))
        raise AssertionError("no victim to reject")  # pragma: no cover

    def _no_victim(self, err: LookupError, victims: list[K]) -> str:
        freed = sum(self._sizes.get(v, 0) for v in victims)
        left = self._used - self._pinned_bytes - freed
        return self._inconsistent(
            f"found no victim ({type(err).__name__}: {err}) although {format_bytes(left)} of "
            f"unpinned entries remain"
        )

    def _inconsistent(self, what: str) -> str:
        return (
            f"the eviction policy {self.policy!r} is inconsistent with the cache: it {what}. "
            f"The cache is unchanged; check the policy's pin/unpin and pop_victim bookkeeping"
        )

    def _give_back(self, victims: list[K]) -> None:
        """Return chosen-but-not-evicted victims to the policy (see restore_victims)."""
        sizes = self._sizes
        chosen = [(v, sizes[v]) for v in dict.fromkeys(victims) if v in sizes]
        restore = getattr(self.policy, "restore_victims", None)
        if restore is not None:
            restore(chosen)
        else:  # a policy written without the base class: EvictionPolicy's default
            EvictionPolicy.restore_victims(self.policy, chosen)

    def _unadmit(self, key: K) -> None:
        """The admission of a new key raised: make sure the policy does not hold it.

        A policy exception means the policy did not take the key; an interrupt may land just
        after it did. Removing an absent key is a no-op for the built-in policies.
        """
        try:
            self.policy.update_on_remove(key)
        except Exception:  # a policy that refuses to remove an unknown key never held it
            pass

    def _put_checked(self, key: K, value: Any, size: int) -> list[K]:
        """The rare path of put(): admission fails, or the key replaces an unpinned entry."""
        self._check_admission(key, size)  # raises before anything changes
        # Replacing: release the old size first (not an eviction). No undo log covers the policy
        # forgetting the old key, so its state is saved and put back if anything below raises.
        old_size = self._sizes[key]
        saved = _policy_state(self.policy, self._sizes)
        victims: list[K] = []
        freed = 0
        try:
            self.policy.update_on_remove(key)
            over = self._used - old_size + size - self.capacity
            if over > 0:
                if self._undo is not None:
                    self._undo.clear()
                freed = self._choose_victims(over, victims)
            n_victims = len(victims)
            self._admit(key, size)
        except BaseException:
            if saved is not None:
                _restore_policy_state(self.policy, saved)
                self._bind_policy()
            else:  # best effort for a policy without a __dict__: it holds the old key again
                self._unadmit(key)
                self._give_back(victims)
                self.policy.update_on_put(key, old_size)
            raise
        values, sizes = self._values, self._sizes
        values[key] = value
        sizes[key] = size
        self._used += size - old_size - freed
        self._evictions += n_victims
        self._evicted_bytes += freed
        try:
            for victim in victims:
                del values[victim], sizes[victim]
        except BaseException:  # an interrupt between two victims: finish, then pass it on
            self._drop(victims)
            raise
        return victims

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

    def pin(self, key: K) -> int:
        """Mark ``key`` in use by one more replica; returns its pin count."""
        return self._pin(key, None)[1]

    def _pin(self, key: K, ticket: _Ticket | None) -> tuple[Any, int]:
        with self._lock:
            self._resident(key, "pin")
            pins = self._pins.get(key, 0) + 1
            self._pins[key] = pins
            if ticket is not None:  # recorded with the pin, before any call can be interrupted
                ticket.done = True
                ticket.handle.held += 1
            if pins == 1:
                self._pinned_bytes += self._sizes[key]
                try:
                    self.policy.update_on_pin(key)
                except BaseException as exc:
                    del self._pins[key]
                    self._pinned_bytes -= self._sizes[key]
                    if ticket is not None:
                        ticket.done = False
                        ticket.handle.held -= 1
                    if not isinstance(exc, Exception):  # an interrupt: the update may be done
                        self.policy.update_on_unpin(key)
                    raise
            return self._values[key], pins

    def unpin(self, key: K) -> int:
        """Release one replica's pin; returns the remaining count. Never below zero."""
        return self._unpin(key, None)

    def _unpin(self, key: K, ticket: _Ticket | None) -> int:
        with self._lock:
            return self._unpin_locked(key, ticket)

    def _unpin_locked(self, key: K, ticket: _Ticket | None) -> int:
        # the caller holds the lock
        if ticket is not None and not ticket.handle.held:  # the handle holds no pin to give
            return self._pins.get(key, 0)
        pins = self._pins.get(key, 0)
        if pins == 0:  # a key that is not resident is not pinned either: the same error
            raise NotPinned(f"{key!r} is not pinned: unpin() without a matching pin()")
        if ticket is not None:
            ticket.done = True
            ticket.handle.held -= 1
        if pins > 1:
            self._pins[key] = pins - 1
            return pins - 1
        del self._pins[key]
        self._pinned_bytes -= self._sizes[key]
        try:
            self.policy.update_on_unpin(key)
        except Exception:  # the policy refused: the pin stays, the cache is unchanged
            self._pins[key] = 1
            self._pinned_bytes += self._sizes[key]
            if ticket is not None:
                ticket.done = False
                ticket.handle.held += 1
            raise
        except BaseException:  # an interrupt: finish the release (a no-op if it was done)
            self.policy.update_on_unpin(key)
            raise
        return 0

    def pinned(self, key: K) -> _Pinned[K]:
        """Hold a pin for a replica's lifetime: ``with cache.pinned(k) as weights: ...``.

        Each ``with`` block holds its own pin, so one handle may be entered again, nested or by
        several threads at once (a handle kept per model and shared by request handlers): the
        entry stays pinned until the last block using it exits. That is what a handler expects
        of a shared handle; refusing re-entry instead would fail a second handler only when its
        request happened to overlap another's, a timing-dependent error. An exit with no block
        of the handle left open releases nothing, so it never takes another holder's pin. A
        block releases its pin however it ends, the body raising included. An interrupt
        (Ctrl-C) that lands while the pin is taken or released is caught by ``__enter__`` or
        ``__exit__``, which finish the release before passing it on. What Python cannot
        guarantee: an interrupt delivered at the very first instruction of ``__enter__`` or
        ``__exit__`` themselves (true of every context manager written in Python), or a second
        interrupt during the release, leaves the pin held; the cache stays consistent and
        usable, and ``unpin`` releases it.
        """
        return _Pinned(self, key)

    def remove(self, key: K) -> None:
        """Drop an unpinned entry on purpose (not counted as an eviction)."""
        with self._lock:
            self._resident(key, "remove")
            if key in self._pins:
                raise EntryPinned(
                    f"{key!r} is pinned {self._pins[key]}x; unpin it before removing it"
                )
            sizes = self._sizes
            try:
                self.policy.update_on_remove(key)
            except Exception:
                raise  # the policy refused: nothing changed
            except BaseException:  # an interrupt: finish the removal (a no-op if it was done)
                self._used -= sizes[key]
                del sizes[key], self._values[key]
                self.policy.update_on_remove(key)
                raise
            self._used -= sizes[key]
            del sizes[key], self._values[key]

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
