"""One KV offload tier: a byte budget, an eviction policy, and chunks that may not be evicted.

A tier is what LMCache calls a storage backend (its local CPU and local disk backends): it holds
copies of KV chunks, keyed by the chunk's prefix name, under a byte budget, and chooses victims
with a policy of its own from :mod:`servelab.weights.policies` (each tier its own instance).

**can_evict.** A chunk may be evicted only when it is not pinned and its reference count is 1
(the tier's own reference). A *pin* means a lookup found the chunk and its retrieve has not
completed; a *reference* above 1 means a transfer (a copy to the GPU, or a write-back into the
tier below) is still reading this copy. Either way, freeing it would hand out memory that is
being read. The policy is told when a chunk stops and starts being evictable
(``update_on_pin`` / ``update_on_unpin``), so it never offers such a chunk as a victim, and the
tier checks each victim again anyway: a policy that names one raises
:class:`~servelab.kv.offload.errors.OffloadPolicyInconsistent` and changes nothing.

**Allocate, evict, retry.** :meth:`Tier.put` first decides whether the chunk can fit at all:
larger than the tier raises :class:`~servelab.kv.offload.errors.ChunkTooLarge` (no wait helps);
larger than what eviction can free right now (the rest is pinned or referenced) is a *miss*, or,
with a :class:`Wait`, a bounded busy wait: retried after ``interval_s`` until a count or a
timeout runs out, then a miss. LMCache's loop sleeps and retries forever, so an all-pinned
backend spins for good; here every wait has an end.

**Plan, write, commit.** An insertion is three phases so that a failure anywhere changes
nothing: the plan pops victims from the policy (an undo log can put them back) and admits the
new keys to it; the write makes the new copies (the only phase that touches storage); the commit
updates the books and drops the victims' copies. :class:`~servelab.kv.offload.hierarchy.
OffloadHierarchy` runs the phases of several tiers as one transaction.

The storage is pluggable (:class:`Storage`): :class:`HostStorage` keeps ``bytes`` (no torch),
:mod:`servelab.kv.offload.cpu` keeps tensors in (pinned) host memory, :mod:`servelab.kv.offload.
disk` keeps verified files.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from servelab.kv.offload.errors import (
    ChunkInUse,
    ChunkNotFound,
    ChunkNotPinned,
    ChunkNotReferenced,
    ChunkTooLarge,
    InvalidChunkKey,
    InvalidPayload,
    InvalidTierConfig,
    OffloadPolicyInconsistent,
    TierInUse,
)
from servelab.units import format_bytes
from servelab.weights.policies import LRU, EvictionPolicy

__all__ = ["HostStorage", "PutResult", "Storage", "Tier", "TierStats", "Wait"]

K = TypeVar("K", bound=Hashable)

_POLICY_METHODS = (
    "update_on_put",
    "update_on_hit",
    "update_on_remove",
    "update_on_pin",
    "update_on_unpin",
    "pop_victims",
    "restore_victims",
    "undo_log",
    "eviction_order",
    "__len__",
)


class Storage(Protocol):
    """Where a tier's copies live. ``prepare`` validates a payload before anything changes."""

    kind: str

    def check_key(self, key: Any) -> None:
        """Raise InvalidChunkKey for a key this storage cannot name."""

    def prepare(self, payload: Any) -> tuple[Any, int]:
        """(what ``write`` takes, the bytes this tier's copy will take); InvalidPayload if not."""

    def write(self, key: Any, prepared: Any) -> Any:
        """Make this tier's own copy; returns its handle. Raises before leaving anything."""

    def read(self, key: Any, handle: Any) -> Any:
        """A payload the caller may keep (a copy, or immutable); CorruptChunk if unverifiable."""

    def drop(self, key: Any, handle: Any) -> None:
        """Free the copy. Never raises for a copy this storage made."""


class HostStorage:
    """``bytes`` in host memory: the storage of the course's tiers (no torch needed)."""

    kind = "host"

    def check_key(self, key: Any) -> None:
        try:
            hash(key)
        except TypeError:
            raise InvalidChunkKey(
                f"a chunk key must be hashable, got {type(key).__name__}"
            ) from None

    def prepare(self, payload: Any) -> tuple[bytes, int]:
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise InvalidPayload(
                f"a host tier stores bytes, got {type(payload).__name__}; pass the chunk's "
                f"KV serialized, or use a CPU tier for tensors"
            )
        data = bytes(payload)  # the tier's own copy: the caller may reuse its buffer
        if not data:
            raise InvalidPayload("an empty chunk holds no KV; refusing to store 0 bytes")
        return data, len(data)

    def write(self, key: Any, prepared: bytes) -> bytes:
        return prepared

    def read(self, key: Any, handle: bytes) -> bytes:
        return handle

    def drop(self, key: Any, handle: bytes) -> None:
        return None


@dataclass(frozen=True)
class Wait:
    """A bounded busy wait: retry every ``interval_s`` at most ``attempts`` more times and/or
    until ``timeout_s`` has passed. At least one bound is required: a wait without an end is
    LMCache's loop that spins forever on an all-pinned tier."""

    attempts: int | None = None
    timeout_s: float | None = None
    interval_s: float = 0.1

    def __post_init__(self) -> None:
        if self.attempts is None and self.timeout_s is None:
            raise InvalidTierConfig("a Wait needs attempts= or timeout_s= (or both): never forever")
        if self.attempts is not None and (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 0
        ):
            raise InvalidTierConfig(f"attempts must be an int >= 0, got {self.attempts!r}")
        for name in ("timeout_s", "interval_s"):
            v = getattr(self, name)
            if v is None and name == "timeout_s":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise InvalidTierConfig(f"{name} must be a number >= 0, got {v!r}")

    def retries(self) -> Iterator[int]:
        """Yields 1, 2, ... before each retry (after sleeping) until a bound is reached."""
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        n = 0
        while self.attempts is None or n < self.attempts:
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(self.interval_s)
            n += 1
            yield n


@dataclass(frozen=True)
class PutResult:
    """What a put did: ``stored`` False is a miss (no room now); ``waited`` retries taken."""

    stored: bool
    evicted: tuple[Any, ...] = ()
    waited: int = 0


@dataclass(frozen=True)
class TierStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    evicted_bytes: int = 0
    full_misses: int = 0  # puts that found no room


class _NoRoom(Exception):
    """Internal: the adds do not fit in what eviction can free now (a miss, not an error)."""


@dataclass
class _Plan:
    """One tier's share of an insertion: admitted to the policy, victims popped, not written."""

    tier: Tier[Any]
    adds: list[tuple[Any, Any, int]] = field(default_factory=list)  # key, prepared, size
    rejected: list[Any] = field(default_factory=list)  # keys that did not fit
    victims: list[Any] = field(default_factory=list)
    written: dict[Any, Any] = field(default_factory=dict)  # key -> handle


def _check_capacity(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise InvalidTierConfig(f"capacity_bytes must be a positive int, got {n!r}")
    return n


class Tier(Generic[K]):
    """A byte budget of KV chunks with an eviction policy, pins and reference counts."""

    def __init__(
        self,
        capacity_bytes: int,
        policy: EvictionPolicy[K] | None = None,
        *,
        storage: Storage | None = None,
        name: str = "tier",
    ) -> None:
        self.capacity = _check_capacity(capacity_bytes)
        policy = LRU() if policy is None else policy
        missing = [m for m in _POLICY_METHODS if not callable(getattr(policy, m, None))]
        if missing:
            raise InvalidTierConfig(
                f"policy must be an EvictionPolicy from servelab.weights.policies; a "
                f"{type(policy).__name__!r} has no {', '.join(missing)}"
            )
        if len(policy) or getattr(policy, "_servelab_tier", None) is not None:
            raise TierInUse(f"{policy!r} already holds keys or decides for another tier")
        try:
            policy._servelab_tier = name  # type: ignore[attr-defined]
        except AttributeError:  # a policy with __slots__: ownership is not recorded
            pass
        self.policy: EvictionPolicy[K] = policy
        self.storage: Storage = HostStorage() if storage is None else storage
        self.name = name
        self._undo = policy.undo_log()
        self._sizes: dict[K, int] = {}
        self._handles: dict[K, Any] = {}
        self._pins: dict[K, int] = {}  # pinned keys only
        self._refs: dict[K, int] = {}  # keys with references beyond the tier's own: the extra
        self._used = 0
        self._held = 0  # bytes of chunks can_evict refuses
        self._hits = self._misses = self._evictions = self._evicted_bytes = self._full = 0
        self._lock: threading.RLock = threading.RLock()
        self._owner: object | None = None  # the hierarchy this tier belongs to

    # --- can_evict: pins and references ----------------------------------------------------

    def can_evict(self, key: K) -> bool:
        """Not pinned by a lookup and referenced by nothing but this tier."""
        with self._lock:
            self._resident(key, "ask can_evict of")
            return key not in self._pins and key not in self._refs

    def pin(self, key: K) -> int:
        """A lookup found ``key``: keep it until its retrieve completes. Returns the count."""
        with self._lock:
            self._resident(key, "pin")
            n = self._pins.get(key, 0) + 1
            if n == 1:
                self._block(key)
            self._pins[key] = n
            return n

    def unpin(self, key: K) -> int:
        """Release one pin; the count never goes below zero (:class:`ChunkNotPinned`)."""
        with self._lock:
            self._resident(key, "unpin")
            n = self._pins.get(key, 0)
            if n == 0:
                raise ChunkNotPinned(f"{self.name}: {key!r} is not pinned: unpin() without pin()")
            if n == 1:
                del self._pins[key]
                self._unblock(key)
            else:
                self._pins[key] = n - 1
            return n - 1

    def ref(self, key: K) -> int:
        """A transfer reads this copy: count it. Returns the reference count (1 + transfers)."""
        with self._lock:
            self._resident(key, "ref")
            n = self._refs.get(key, 0) + 1
            if n == 1:
                self._block(key)
            self._refs[key] = n
            return n + 1

    def unref(self, key: K) -> int:
        """The transfer is done. The tier's own reference cannot be dropped this way."""
        with self._lock:
            self._resident(key, "unref")
            n = self._refs.get(key, 0)
            if n == 0:
                raise ChunkNotReferenced(
                    f"{self.name}: {key!r} has only the tier's own reference: unref() without ref()"
                )
            if n == 1:
                del self._refs[key]
                self._unblock(key)
            else:
                self._refs[key] = n - 1
            return n

    @contextmanager
    def held(self, key: K) -> Iterator[Any]:
        """``with tier.held(k) as payload:`` a transfer's reference for the block's duration."""
        with self._lock:
            self.ref(key)
            try:
                payload = self.storage.read(key, self._handles[key])
            except BaseException:
                self.unref(key)
                raise
        try:
            yield payload
        finally:
            self.unref(key)

    def _block(self, key: K) -> None:
        """``key`` stops being evictable (first pin or first transfer)."""
        if key in self._pins or key in self._refs:
            return  # already blocked
        self.policy.update_on_pin(key)
        self._held += self._sizes[key]

    def _unblock(self, key: K) -> None:
        if key in self._pins or key in self._refs:
            return  # still blocked by the other holder
        self.policy.update_on_unpin(key)
        self._held -= self._sizes[key]

    def pin_count(self, key: K) -> int:
        return self._pins.get(key, 0)

    def ref_count(self, key: K) -> int:
        """1 for a resident chunk no transfer reads; 0 for an absent one."""
        return self._refs.get(key, 0) + 1 if key in self._sizes else 0

    # --- the learner API: put / get / remove -----------------------------------------------

    def put(self, key: K, payload: Any, *, wait: Wait | None = None) -> PutResult:
        """Store ``key``: allocate, evict, retry. A miss when no room can be made (after the
        bounded ``wait``, if any); :class:`ChunkTooLarge` when no room ever can. A key already
        here is refreshed (a hit for the policy), not stored twice. Victims are dropped: a tier
        inside a hierarchy is stored through :meth:`OffloadHierarchy.store`, which writes them
        into the tier below."""
        self.storage.check_key(key)
        prepared, size = self.storage.prepare(payload)
        self._check_fits(key, size)
        retries = wait.retries() if wait is not None else iter(())
        waited = 0
        while True:
            with self._lock:
                if key in self._sizes:
                    self._touch(key)
                    return PutResult(True, (), waited)
                try:
                    plan = self._plan([(key, prepared, size)], best_effort=False)
                except _NoRoom:
                    pass
                else:
                    try:
                        self._write(plan)
                    except BaseException:
                        self._abort(plan)
                        raise
                    self._commit(plan)
                    return PutResult(True, tuple(plan.victims), waited)
            n = next(retries, None)
            if n is None:
                with self._lock:
                    self._full += 1
                return PutResult(False, (), waited)
            waited = n

    def get(self, key: K) -> Any | None:
        """The payload (refreshing the chunk for the policy), or None on a miss."""
        with self._lock:
            if key not in self._sizes:
                self._misses += 1
                return None
            payload = self.storage.read(key, self._handles[key])
            self._touch(key)
            return payload

    def remove(self, key: K) -> None:
        """Drop a chunk on purpose; :class:`ChunkInUse` while pinned or referenced."""
        with self._lock:
            self._resident(key, "remove")
            if key in self._pins or key in self._refs:
                raise ChunkInUse(
                    f"{self.name}: {key!r} is pinned {self.pin_count(key)}x and referenced "
                    f"{self.ref_count(key)}x; freeing it would free memory a lookup or a "
                    f"transfer still reads. Release it first."
                )
            self.policy.update_on_remove(key)
            handle = self._handles.pop(key)
            self._used -= self._sizes.pop(key)
            self.storage.drop(key, handle)

    def _touch(self, key: K) -> None:
        self.policy.update_on_hit(key)
        self._hits += 1

    def _resident(self, key: K, action: str) -> None:
        if key not in self._sizes:
            raise ChunkNotFound(f"cannot {action} {key!r}: it is not in the {self.name} tier")

    def _check_fits(self, key: object, size: int) -> None:
        if size > self.capacity:
            raise ChunkTooLarge(
                f"{key!r} takes {format_bytes(size)}, more than the whole "
                f"{format_bytes(self.capacity)} {self.name} tier: no eviction or wait can "
                f"make room. Use smaller chunks or a larger tier."
            )

    # --- plan, write, commit ----------------------------------------------------------------

    def _plan(self, adds: Sequence[tuple[K, Any, int]], *, best_effort: bool) -> _Plan:
        """Choose victims and admit ``adds`` to the policy, changing nothing else.

        Adds that do not fit in what eviction can free are rejected (``best_effort``) or the
        whole plan is refused with :class:`_NoRoom`. The caller ends a plan with
        :meth:`_commit` or :meth:`_abort`.
        """
        plan = _Plan(self)
        room = self.capacity - self._held
        total = 0
        for key, prepared, size in adds:
            if total + size <= room:
                plan.adds.append((key, prepared, size))
                total += size
            elif best_effort:
                plan.rejected.append(key)
            else:
                raise _NoRoom
        over = self._used + total - self.capacity
        if self._undo is not None:
            self._undo.clear()
        admitted: list[K] = []
        try:
            if over > 0:
                try:
                    freed = self.policy.pop_victims(over, self._sizes, plan.victims)
                except LookupError as err:
                    raise OffloadPolicyInconsistent(
                        f"{self.name}: the policy {self.policy!r} found no victim ({err}) "
                        f"although {format_bytes(self._used - self._held)} are evictable"
                    ) from err
                self._check_victims(plan.victims, freed, over)
            for key, _, size in plan.adds:
                self.policy.update_on_put(key, size)
                admitted.append(key)
        except BaseException:
            for key in admitted:
                self.policy.update_on_remove(key)
            self._restore(plan.victims)
            raise
        return plan

    def _check_victims(self, victims: list[K], freed: int, over: int) -> None:
        seen: set[K] = set()
        for v in victims:
            if v not in self._sizes:
                why = "which is not in the tier"
            elif v in self._pins or v in self._refs:
                why = "which can_evict refuses (pinned or referenced)"
            elif v in seen:
                why = "twice"
            else:
                seen.add(v)
                continue
            raise OffloadPolicyInconsistent(
                f"{self.name}: the policy {self.policy!r} named {v!r} as a victim, {why}; "
                f"every tier is unchanged"
            )
        if freed < over:
            raise OffloadPolicyInconsistent(
                f"{self.name}: the policy {self.policy!r} freed {freed} of {over} bytes"
            )

    def _restore(self, victims: list[K]) -> None:
        chosen = [(v, self._sizes[v]) for v in dict.fromkeys(victims) if v in self._sizes]
        if chosen or self._undo:
            self.policy.restore_victims(chosen)

    def _write(self, plan: _Plan) -> None:
        """Make the new copies; on failure drop the ones made and re-raise."""
        try:
            for key, prepared, _ in plan.adds:
                plan.written[key] = self.storage.write(key, prepared)
        except BaseException:
            for key, handle in plan.written.items():
                self.storage.drop(key, handle)
            plan.written.clear()
            raise

    def _abort(self, plan: _Plan) -> None:
        """Undo a plan (and its writes): the tier is as it was before :meth:`_plan`."""
        for key, handle in plan.written.items():
            self.storage.drop(key, handle)
        plan.written.clear()
        for key, _, _ in plan.adds:
            self.policy.update_on_remove(key)
        self._restore(plan.victims)

    def _commit(self, plan: _Plan) -> None:
        for v in plan.victims:
            size = self._sizes.pop(v)
            handle = self._handles.pop(v)
            self._used -= size
            self._evictions += 1
            self._evicted_bytes += size
            self.storage.drop(v, handle)
        for key, _, size in plan.adds:
            self._sizes[key] = size
            self._handles[key] = plan.written[key]
            self._used += size

    # --- inspection -------------------------------------------------------------------------

    @property
    def used(self) -> int:
        """Bytes of this tier's own copies (a chunk also held by another tier counts there too)."""
        return self._used

    @property
    def free(self) -> int:
        return self.capacity - self._used

    @property
    def held_bytes(self) -> int:
        """Bytes that ``can_evict`` refuses now (pinned or referenced)."""
        return self._held

    @property
    def stats(self) -> TierStats:
        return TierStats(self._hits, self._misses, self._evictions, self._evicted_bytes, self._full)

    def __contains__(self, key: object) -> bool:
        return key in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    def keys(self) -> list[K]:
        return list(self._sizes)

    def size_of(self, key: K) -> int:
        self._resident(key, "size")
        return self._sizes[key]

    def eviction_order(self) -> list[K]:
        """The chunks can_evict allows, next victim first."""
        with self._lock:
            return self.policy.eviction_order()

    def __repr__(self) -> str:
        return (
            f"Tier({self.name!r}, {format_bytes(self._used)} of {format_bytes(self.capacity)}, "
            f"{len(self._sizes)} chunks, {format_bytes(self._held)} held, "
            f"policy={self.policy.name})"
        )
