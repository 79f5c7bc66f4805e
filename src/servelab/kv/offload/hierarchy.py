"""The hierarchy of KV tiers under the GPU prefix cache: store cascades down, retrieve promotes up.

The GPU block pool's evictable cached blocks are the top of the hierarchy (the prefix cache,
:mod:`servelab.kv.prefix`); below it come the tiers given here, fastest first (a CPU tier, then
a disk tier). The flow, as LMCache's backends run it:

* :meth:`OffloadHierarchy.store` when a GPU block holding a cached prefix is reclaimed
  (*write-back*): the chunk goes into the first tier; what that tier evicts to make room is
  written into the tier below (unless that tier holds a copy already), and so on; what the last
  tier evicts is dropped, and so is a victim the tier below has no room for or is smaller than
  (the store succeeds, the victim is in ``dropped``; the course's reference drops it too). With
  ``write_through=True`` a stored chunk is also written into the second tier at once: a later
  eviction from the first costs no write, at the price of a disk write for every chunk, hot or
  not.
* :meth:`OffloadHierarchy.lookup` finds the longest prefix of a request's chunk keys held by
  any tier and *pins* each found copy, so nothing evicts it before it is read;
* :meth:`OffloadHierarchy.retrieve` reads the chunks (each under a transfer reference), promotes
  those found below the first tier into it, and only then unpins: a chunk is never evicted
  mid-retrieve, by its own promotion or by anyone else's store;
* :meth:`OffloadHierarchy.release` drops a lookup's pins without reading (a request aborted).

One insertion (a store with its cascade, or a retrieve's promotions) is one transaction over
all tiers (plan, write, commit; see :mod:`servelab.kv.offload.tier`): an error anywhere, a disk
write that fails included, leaves every tier as it was.

**Bytes are per tier.** A chunk in two tiers takes memory in both, and each tier's ``used``
counts its own copy; :meth:`OffloadHierarchy.summary` reports the per-tier sums, the bytes of
distinct chunks, and the difference (the duplicated copies), so nothing is counted twice where
the question is "how much KV does the node hold".
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from servelab.kv.block_hash import root_hash, sha256_chain
from servelab.kv.offload.errors import (
    InvalidChunkKey,
    InvalidTierConfig,
    LookupClosed,
    TierInUse,
)
from servelab.kv.offload.tier import Tier, Wait, _NoRoom, _Plan

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "Lookup",
    "OffloadHierarchy",
    "OffloadSummary",
    "StoreResult",
    "chunk_keys",
]

DEFAULT_CHUNK_TOKENS = 256  # LMCache's default chunk size


def chunk_keys(
    token_ids: Sequence[int], *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS, extra_key: bytes = b""
) -> list[int]:
    """The key of each full chunk of ``token_ids``: its prefix name, a SHA-256 chained over the
    chunk's ids and its parent's name (:mod:`servelab.kv.block_hash`), rooted on ``extra_key``
    (the model, a cache salt, an adapter). Equal keys mean equal whole prefixes, across
    processes and restarts, which a disk tier needs. A trailing partial chunk has no key."""
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens <= 0:
        raise InvalidTierConfig(f"chunk_tokens must be a positive int, got {chunk_tokens!r}")
    if not isinstance(extra_key, bytes):
        raise InvalidChunkKey(f"extra_key must be bytes, got {type(extra_key).__name__}")
    ids = list(token_ids)
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise InvalidChunkKey(f"token ids must be non-negative ints, got {t!r}")
    return sha256_chain(root_hash(extra_key), ids, chunk_tokens)


@dataclass(frozen=True)
class StoreResult:
    """What a store did. ``stored`` False is a miss: the first tier could not make room."""

    stored: bool
    evicted: tuple[tuple[str, Any], ...] = ()  # (tier name, key) evicted by this store
    demoted: tuple[tuple[str, Any], ...] = ()  # (tier name, key) written into a lower tier
    dropped: tuple[Any, ...] = ()  # keys that left the hierarchy (no tier below took them)
    waited: int = 0


@dataclass(frozen=True)
class OffloadSummary:
    """Bytes by tier and overall. ``tier_bytes`` sums each tier's own copies; ``unique_bytes``
    counts each chunk once (at its largest copy); ``duplicate_bytes`` is the difference."""

    tier_bytes: tuple[tuple[str, int], ...]
    tier_chunks: tuple[tuple[str, int], ...]
    unique_chunks: int
    total_bytes: int
    unique_bytes: int

    @property
    def duplicate_bytes(self) -> int:
        return self.total_bytes - self.unique_bytes

    def __str__(self) -> str:
        per = ", ".join(f"{n}: {b} B" for n, b in self.tier_bytes)
        return (
            f"{per}; {self.unique_chunks} distinct chunks in {self.unique_bytes} B, "
            f"{self.duplicate_bytes} B more as copies in a second tier (each tier counts its own)"
        )


class Lookup:
    """The chunks a lookup found and pinned, in prefix order; open until retrieved or released."""

    __slots__ = ("_owner", "found", "keys", "open")

    def __init__(self, owner: OffloadHierarchy, found: list[tuple[Any, int]]) -> None:
        self._owner = owner
        self.found = found  # (key, index of the tier whose copy is pinned)
        self.keys = [k for k, _ in found]
        self.open = True

    @property
    def hits(self) -> int:
        """Chunks found (a prefix of the keys asked for)."""
        return len(self.found)

    def __repr__(self) -> str:
        state = "open" if self.open else "closed"
        return f"Lookup({self.hits} chunks, {state})"


class OffloadHierarchy:
    """KV tiers below the GPU, fastest first; see the module docstring for the flow."""

    def __init__(
        self,
        tiers: Sequence[Tier[Any]],
        *,
        write_through: bool = False,
        wait: Wait | None = None,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    ) -> None:
        tiers = list(tiers)
        if not tiers or not all(isinstance(t, Tier) for t in tiers):
            raise InvalidTierConfig("a hierarchy needs one or more Tier objects, fastest first")
        if len({id(t) for t in tiers}) != len(tiers) or len({t.name for t in tiers}) != len(tiers):
            raise InvalidTierConfig("each tier appears once, under a name of its own")
        if wait is not None and not isinstance(wait, Wait):
            raise InvalidTierConfig(f"wait must be a Wait or None, got {wait!r}")
        if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens <= 0:
            raise InvalidTierConfig(f"chunk_tokens must be a positive int, got {chunk_tokens!r}")
        for t in tiers:
            if t._owner is not None:
                raise TierInUse(f"{t!r} already belongs to a hierarchy; give each its own tiers")
        self._lock = threading.RLock()
        for t in tiers:
            t._owner = self
            t._lock = self._lock  # one lock for every tier: a transaction spans them
        self.tiers = tiers
        self.write_through = bool(write_through)
        self.wait = wait
        self.chunk_tokens = chunk_tokens

    def chunk_keys(self, token_ids: Sequence[int], extra_key: bytes = b"") -> list[int]:
        """:func:`chunk_keys` at this hierarchy's chunk size."""
        return chunk_keys(token_ids, chunk_tokens=self.chunk_tokens, extra_key=extra_key)

    # --- store ------------------------------------------------------------------------------

    def store(self, key: Hashable, payload: Any, *, wait: Wait | None = None) -> StoreResult:
        """Offload one chunk (write-back, or write-through when configured).

        A miss when the first tier cannot make room (everything evictable is pinned or
        referenced), after the bounded busy wait if one is configured;
        :class:`~servelab.kv.offload.errors.ChunkTooLarge` when no wait could help.
        """
        top = self.tiers[0]
        prepared = self._prepare(key, payload)
        wait = self.wait if wait is None else wait
        retries = wait.retries() if wait is not None else iter(())
        waited = 0
        while True:
            with self._lock:
                if key in top:
                    top._touch(key)
                    return StoreResult(True, waited=waited)
                try:
                    result = self._insert([(key, payload, prepared)], best_effort=False)
                except _NoRoom:
                    pass
                else:
                    return StoreResult(True, *result, waited=waited)
            n = next(retries, None)
            if n is None:
                with self._lock:
                    top._full += 1
                return StoreResult(False, waited=waited)
            waited = n

    def _prepare(self, key: Hashable, payload: Any) -> tuple[Any, int]:
        """Validate the key for every tier and the payload for the first; nothing changes."""
        try:
            hash(key)
        except TypeError:
            raise InvalidChunkKey(
                f"a chunk key must be hashable, got {type(key).__name__}"
            ) from None
        for t in self.tiers:
            t.storage.check_key(key)
        top = self.tiers[0]
        prepared, size = top.storage.prepare(payload)
        top._check_fits(key, size)
        return prepared, size

    def _insert(
        self, adds: list[tuple[Any, Any, tuple[Any, int]]], *, best_effort: bool
    ) -> tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...], tuple[Any, ...]]:
        """Insert ``adds`` (key, payload, prepared for the first tier) with the cascade below,
        as one transaction. Returns (evicted, demoted, dropped). The caller holds the lock."""
        tiers = self.tiers
        plans: list[_Plan] = []
        evicted: list[tuple[str, Any]] = []
        demoted: list[tuple[str, Any]] = []
        too_large: set[Any] = set()  # victims larger than the whole tier below: dropped too
        try:
            plan = tiers[0]._plan([(k, p, s) for k, _, (p, s) in adds], best_effort=best_effort)
            plans.append(plan)
            accepted = {k for k, _, _ in plan.adds}
            carry: list[tuple[Any, Any]] = []
            if self.write_through:
                carry += [(k, payload) for k, payload, _ in adds if k in accepted]
            carry += self._victims(plan, 0, evicted)
            for i, tier in enumerate(tiers[1:], start=1):
                down = []
                for k, payload in carry:
                    if k in tier:
                        continue
                    prepared, size = tier.storage.prepare(payload)
                    if size <= tier.capacity:
                        down.append((k, prepared, size))
                    else:
                        too_large.add(k)
                plan = tier._plan(down, best_effort=True)
                plans.append(plan)
                demoted += [(tier.name, k) for k, _, _ in plan.adds]
                carry = self._victims(plan, i, evicted)
            dropped = {k for k, _ in carry} | too_large
            for p in plans[1:]:
                dropped.update(p.rejected)
            for p in plans:
                p.tier._write(p)
        except BaseException:
            for p in reversed(plans):
                p.tier._abort(p)
            raise
        for p in plans:
            p.tier._commit(p)
        still = set().union(*(t.keys() for t in tiers)) if dropped else set()
        return tuple(evicted), tuple(demoted), tuple(k for k in dropped if k not in still)

    def _victims(self, plan: _Plan, i: int, evicted: list[tuple[str, Any]]) -> list[Any]:
        """The victims of tier ``i``'s plan with their payloads (read only if a tier follows)."""
        tier = self.tiers[i]
        evicted += [(tier.name, v) for v in plan.victims]
        if i + 1 == len(self.tiers):
            return [(v, None) for v in plan.victims]
        return [(v, tier.storage.read(v, tier._handles[v])) for v in plan.victims]

    # --- lookup, retrieve, release -------------------------------------------------------------

    def lookup(self, keys: Sequence[Hashable]) -> Lookup:
        """Pin the longest prefix of ``keys`` that some tier holds (each in the fastest tier
        that has it). The pins hold until :meth:`retrieve` or :meth:`release`."""
        keys = list(keys)
        for k in keys:
            try:
                hash(k)
            except TypeError:
                raise InvalidChunkKey(
                    f"a chunk key must be hashable, got {type(k).__name__}"
                ) from None
        with self._lock:
            found: list[tuple[Any, int]] = []
            for k in keys:
                where = next((i for i, t in enumerate(self.tiers) if k in t), None)
                if where is None:
                    break
                found.append((k, where))
            for k, i in found:
                self.tiers[i].pin(k)
            if len(found) < len(keys):
                self.tiers[0]._misses += 1
            return Lookup(self, found)

    def _check_open(self, lookup: Lookup) -> None:
        if not isinstance(lookup, Lookup) or lookup._owner is not self:
            raise InvalidTierConfig("that lookup was not made by this hierarchy")
        if not lookup.open:
            raise LookupClosed(
                f"{lookup!r} was already retrieved or released; its pins are gone. Look the "
                f"chunks up again."
            )

    def retrieve(self, lookup: Lookup) -> list[Any]:
        """The payloads of a lookup's chunks, in order; promotes chunks found below the first
        tier into it (best effort: what cannot fit stays where it is), then unpins.

        A chunk that does not verify raises :class:`~servelab.kv.offload.errors.CorruptChunk`
        with nothing changed and the lookup still open: release it, and remove the chunk.
        """
        with self._lock:
            self._check_open(lookup)
            payloads: list[Any] = []
            refs: list[tuple[Tier[Any], Any]] = []
            try:
                for k, i in lookup.found:  # a transfer reference while each copy is read
                    tier = self.tiers[i]
                    tier.ref(k)
                    refs.append((tier, k))
                    payloads.append(tier.storage.read(k, tier._handles[k]))
                top = self.tiers[0]
                ups = []
                seen = set()
                for (k, i), payload in zip(lookup.found, payloads, strict=True):
                    if i > 0 and k not in seen and k not in top:
                        seen.add(k)
                        prepared, size = top.storage.prepare(payload)
                        if size <= top.capacity:
                            ups.append((k, payload, (prepared, size)))
                if ups:
                    self._insert(ups, best_effort=True)
            finally:
                for tier, k in reversed(refs):
                    tier.unref(k)
            for k, i in lookup.found:
                t = self.tiers[i]
                t._touch(k)
                t.unpin(k)
            lookup.open = False
            return payloads

    def release(self, lookup: Lookup) -> None:
        """Drop a lookup's pins without reading (the request went away)."""
        with self._lock:
            self._check_open(lookup)
            for k, i in lookup.found:
                self.tiers[i].unpin(k)
            lookup.open = False

    # --- inspection ---------------------------------------------------------------------------

    def where(self, key: Hashable) -> list[str]:
        """The names of the tiers holding a copy of ``key``, fastest first."""
        return [t.name for t in self.tiers if key in t]

    def summary(self) -> OffloadSummary:
        with self._lock:
            largest: dict[Any, int] = {}
            for t in self.tiers:
                for k in t.keys():
                    largest[k] = max(largest.get(k, 0), t._sizes[k])
            return OffloadSummary(
                tier_bytes=tuple((t.name, t.used) for t in self.tiers),
                tier_chunks=tuple((t.name, len(t)) for t in self.tiers),
                unique_chunks=len(largest),
                total_bytes=sum(t.used for t in self.tiers),
                unique_bytes=sum(largest.values()),
            )

    def __repr__(self) -> str:
        mode = "write-through" if self.write_through else "write-back"
        return f"OffloadHierarchy({', '.join(map(repr, self.tiers))}; {mode})"
