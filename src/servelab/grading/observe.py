"""What each topic exposes: every observable field of a graded object, by name.

A report that compares states compares all of these, never a convenient subset: the field left
out is the one that changed (a ``pin`` of an absent key that records the pin and then raises
changes only the pin counts). Each function reads the object through the inspection API the
exercise skeleton provides; ``canon`` renames block ids (see :class:`Canon`), so two block
managers that hand out different physical blocks for the same logical ones compare equal.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import Any

__all__ = [
    "Canon",
    "Unreadable",
    "blocks_fields",
    "budget_fields",
    "changes",
    "frozen",
    "policy_fields",
    "policy_hidden_fields",
    "policy_history",
    "policy_skeleton_fields",
    "prefix_fields",
    "scheduler_fields",
    "shown",
    "weight_cache_fields",
]


class Canon:
    """Renames block ids in order of first appearance, so two implementations that hand out
    different physical blocks for the same logical ones observe the same thing."""

    def __init__(self) -> None:
        self.names: dict[Any, int] = {}
        self.hashes: dict[Any, int] = {}

    def hashed(self, key: Any) -> int:
        """A prefix-cache hash, renamed in order of first appearance: any hash function will do."""
        return self.hashes.setdefault(key, len(self.hashes))

    def __call__(self, block: Any) -> Any:
        if block is None or isinstance(block, bool) or not isinstance(block, int):
            return block
        return self.names.setdefault(block, len(self.names))


def _same(block: Any) -> Any:
    return block


class Unreadable(tuple[str, str]):
    """A field whose reading raised: equal for equal errors, shown in words."""

    __slots__ = ()

    def __new__(cls, error: BaseException) -> Unreadable:
        return super().__new__(cls, ("unreadable", type(error).__name__))

    def __repr__(self) -> str:
        return f"(reading it raised {self[1]})"


def _read(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:
        return Unreadable(exc)


def weight_cache_fields(cache: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """Resident keys (LRU first), used bytes, every non-zero pin count (absent keys too, read
    from the skeleton's ``_pins`` where it exists) and the four counters."""
    keys = list(_read(lambda: list(cache.keys())))
    pins_field = getattr(cache, "_pins", None)
    extra = [k for k in pins_field if k not in keys] if isinstance(pins_field, dict) else []
    pins = {}
    for key in [*keys, *extra]:
        count = _read(lambda k=key: cache.pin_count(k))  # type: ignore[misc]
        if count:
            pins[key] = count
    out: dict[str, Any] = {"resident": keys, "used": _read(lambda: cache.used), "pins": pins}
    source = getattr(cache, "stats", cache)
    for name in ("hits", "misses", "evictions", "evicted_bytes"):
        out[name] = getattr(source, name, None)
    return out


def policy_fields(policy: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """The candidates left and the eviction order, next victim first."""
    return {
        "len": _read(lambda: len(policy)),
        "eviction order": _read(lambda: list(policy.eviction_order())),
    }


def policy_history(policy: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """What the skeleton keeps and no call shows until later: an LFU's counts (``count``), a
    SIEVE's visited keys and hand, either's pinned keys. A hit that forgets to count changes
    no order at once, so a report that left these out would show "nothing changed" where the
    count did."""
    out: dict[str, Any] = {}
    count = getattr(policy, "count", None)
    if isinstance(count, dict):
        out["counts"] = dict(count)
    visited = getattr(policy, "visited", None)
    if isinstance(visited, dict):
        out["visited"] = sorted((k for k, v in visited.items() if v), key=repr)
    pinned = getattr(policy, "pinned", None)
    if isinstance(pinned, set | frozenset):
        out["pinned"] = sorted(pinned, key=repr)
    if "hand" in getattr(policy, "__dict__", {}):
        out["hand"] = policy.hand
    return out


def policy_skeleton_fields(policy: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """A policy's observable fields, then the history its skeleton keeps."""
    return {**policy_fields(policy), **policy_history(policy)}


def policy_hidden_fields(policy: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """A policy's fields and history, then what a call keeps for much later: a SIEVE's queue
    (keys oldest first, pinned ones too) and an LFU's ticks (``reached``). Read only where no
    call differs without them (a pin that moves its key, a tick that wraps)."""
    out = policy_skeleton_fields(policy, canon)
    queue = getattr(policy, "queue", None)
    if isinstance(queue, list):
        out["queue"] = list(queue)
    reached = getattr(policy, "reached", None)
    if isinstance(reached, dict):
        out["ticks"] = dict(reached)
    return out


def blocks_fields(bm: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """Block tables, lengths, refcounts (held blocks, and any other block whose count is not 0:
    one taken but not yet in a table, mid-call, too), the free list in order, and ``num_free``."""
    seqs = sorted(_read(lambda: list(bm.sequences())), key=repr)
    tables = {s: list(_read(lambda s=s: list(bm.block_table(s)))) for s in seqs}  # type: ignore[misc]
    held = sorted({b for t in tables.values() for b in t if isinstance(b, int)})
    free = list(_read(lambda: list(bm.free_list())))
    refs = {b: _read(lambda b=b: bm.refcount(b)) for b in held}  # type: ignore[misc]
    every = _read(lambda: list(range(bm.num_blocks)))
    for b in [*free, *(every if isinstance(every, list) else ())]:
        count = _read(lambda b=b: bm.refcount(b))  # type: ignore[misc]
        if b not in refs and count:
            refs[b] = count
    lengths = {s: _read(lambda s=s: bm.seq_len(s)) for s in seqs}  # type: ignore[misc]
    kept = getattr(bm, "lens", None)  # the skeleton's: a length kept with no table is shown
    if isinstance(kept, dict):
        lengths.update({s: n for s, n in list(kept.items()) if s not in tables})
    return {
        "tables": {s: [canon(b) for b in t] for s, t in tables.items()},
        "lengths": lengths,
        "refcounts": {canon(b): n for b, n in refs.items()},
        "free": [canon(b) for b in free],
        "num_free": _read(lambda: bm.num_free),
    }


def prefix_fields(bm: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """The block manager's fields, then the cache's: hashed blocks, the hash map's blocks and
    the evictable blocks in reclaim order."""
    out = blocks_fields(bm, canon)
    hashed = _read(lambda: [b for b in range(bm.num_blocks) if bm.block_hash(b) is not None])
    out["hashed"] = sorted(canon(b) for b in hashed) if isinstance(hashed, list) else hashed
    mapped = _read(lambda: list(bm.cached().values()))
    out["cached"] = sorted(canon(b) for b in mapped) if isinstance(mapped, list) else mapped
    out["reclaim order"] = [canon(b) for b in _read(lambda: list(bm.evictable()))]
    return out


def scheduler_fields(sched: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """The running and waiting queues as (id, tokens), then the block manager's fields."""

    def queue(name: str) -> Any:
        return _read(lambda: [(s.seq_id, s.num_tokens) for s in getattr(sched, name)])

    out = {"running": queue("running"), "waiting": queue("waiting")}
    bm = getattr(sched, "bm", None)
    if bm is not None:
        out.update(blocks_fields(bm, canon))
    return out


def budget_fields(sched: Any, canon: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """The queues as (id, tokens), every live request's num_computed_tokens, then the block
    manager's fields (the prefix cache's too, when it has one)."""
    out = scheduler_fields(sched, lambda b: b)
    out = {"running": out["running"], "waiting": out["waiting"]}
    ids = [sid for q in (out["running"], out["waiting"]) if isinstance(q, list) for sid, _ in q]
    out["num_computed_tokens"] = {
        sid: _read(partial(sched.num_computed_tokens, sid)) for sid in ids
    }
    bm = getattr(sched, "bm", None)
    if bm is not None:
        cached = hasattr(bm, "evictable")
        out.update(prefix_fields(bm, canon) if cached else blocks_fields(bm, canon))
    return out


def frozen(value: Any) -> Hashable:
    """A hashable form of a field value (dicts keep their order, as the learner sees it)."""
    if isinstance(value, Mapping):
        return tuple((k, frozen(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, set | frozenset):
        return tuple(sorted(map(frozen, value), key=repr))
    return value if isinstance(value, Hashable) else repr(value)


def shown(fields: Mapping[str, Any]) -> str:
    """Every field, as ``name value`` pairs."""
    return ", ".join(f"{name} {value!r}" for name, value in fields.items())


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """The fields that changed, as ``name old -> new``; "nothing changed" when none did."""
    moved = [
        f"{name} {before.get(name)!r} -> {value!r}"
        for name, value in after.items()
        if before.get(name) != value
    ]
    return ", ".join(moved) if moved else "nothing changed"
