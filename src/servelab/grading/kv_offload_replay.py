"""How diagnosis replays the programs of topic ``kv-offload``: names, state, values, and the
programs that tell its known mistakes apart (:mod:`servelab.grading.diagnose`).

Apart from :mod:`servelab.grading.kv_offload` only to keep each file short enough to read in
one sitting; the topic declares :data:`REPLAY` as its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import partial
from typing import Any

from servelab.grading.observe import Canon, frozen
from servelab.grading.readings.kv_offload import kv_offload_reading
from servelab.grading.replay import TopicReplay, plain, program
from servelab.kv.offload.cost import Link, ModelShape
from servelab.testing.kv_offload import (
    crashing_writes,
    hierarchy_class,
    offload_fields,
    payload_for,
    power_cut,
    tier_class_of,
)

__all__ = ["REPLAY", "SEPARATING"]


def _offload_ns(impl: Any) -> dict[str, Any]:
    ns: dict[str, Any] = {"Tier": tier_class_of(impl), "payload": payload_for}
    if isinstance(impl, dict):
        ns["DiskTier"] = impl["DiskTier"]
        ns["Hierarchy"] = hierarchy_class(impl)
        ns["crashing_writes"] = crashing_writes
        # the learner's modules too: a sync bound by name (``from os import fsync``) is seen
        ns["power_cut"] = partial(power_cut, *impl.values())
        ns["Link"] = Link
        ns["ModelShape"] = ModelShape
    return ns


def _offload_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    obj = next((ns[n] for n in ("h", "tier", "disk") if ns.get(n) is not None), None)
    return None if obj is None else frozen(offload_fields(obj))


def _offload_value(value: Any, canon: Canon) -> Hashable:
    """Payloads as bytes, times to six significant digits (a closed form may differ from
    the reference's in the last digits; at three, a term a thousand times smaller than the
    other, such as an attention term linear in the tokens, vanished and two slips looked
    alike), containers element by element."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, list | tuple):
        return tuple(_offload_value(v, canon) for v in value)
    return plain(value)


def _fields(obj: Any, canon: Any = None) -> dict[str, Any]:
    return offload_fields(obj)


def _hidden_fields(obj: Any) -> dict[str, Any]:
    """The usual fields and, for each tier, the keys it keeps a copy of (``_data``): a copy
    dropped while the books still list the chunk shows only there."""
    fields = dict(offload_fields(obj))
    tiers = getattr(obj, "tiers", None)
    for tier in tiers if isinstance(tiers, list) else [obj]:
        data = getattr(tier, "_data", None)
        if isinstance(data, dict):
            prefix = f"{getattr(tier, 'name', '')}." if tiers is not None else ""
            fields[f"{prefix}_data"] = sorted(data, key=repr)
    return fields


SEPARATING = (
    program(  # every rule of one tier: FIFO order, counted pins, references, decide first
        "tier = Tier(100, 'FIFO')",
        "tier.put('a', payload('a', 30))",
        "tier.put('b', payload('b', 30))",
        "tier.put('c', payload('c', 30))",
        "tier.get('a')",
        "tier.pin('b')",
        "tier.pin('b')",
        "tier.unpin('b')",
        "tier.ref('c')",
        "tier.can_evict('a')",
        "tier.can_evict('b')",
        "tier.can_evict('c')",
        "tier.put('d', payload('d', 50))",
        "tier.put('e', payload('e', 20))",
        "tier.pin('e')",
        "tier.put('f', payload('f', 40), wait=2)",
    ),
    program(  # the cascade, a lookup past a gap, a retrieve that must keep its pins
        "h = Hierarchy(60, 120)",
        "h.store('a', payload('a', 30))",
        "h.store('b', payload('b', 30))",
        "h.store('c', payload('c', 30))",
        "h.where('a')",
        "found = h.lookup(['b', 'x', 'a'])",
        "h.release(found)",
        "found = h.lookup(['b', 'a', 'c'])",
        "h.retrieve(found)",
        "found = h.lookup(['a'])",
        "h.retrieve(found)",
        "h.held_bytes()",
    ),
    program(  # the cost model, each term once
        "h = Hierarchy(1000, 1000)",
        "h.recompute_seconds(32768)",
        "h.load_seconds(4096, 'cpu')",
        "h.load_seconds(1000, 'disk')",
        "h.worth_loading(8192, 'disk')",
    ),
    program(  # a crash in mid-write
        "disk = DiskTier(100)",
        "disk.put('a', payload('a', 20))",
        "with crashing_writes(): disk.put('b', payload('b', 40))",
        "disk.keys()",
    ),
)

#: The cost model's figures, each a different prime (none 2, the K and V factor): a slip that
#: leaves out one factor and one that leaves out another give the same times with the
#: Llama-shaped model (its bytes per value is 2, like K and V), not with these.
OTHER_MODEL = ModelShape(
    params=31.0, layers=3, d_model=29, kv_heads=5, head_dim=11, bytes_per_value=7
)
OTHER_LINKS = {"cpu": Link("cpu", 41.0, 43.0), "disk": Link("disk", 47.0, 53.0)}


_OTHER_POLICY = {"LRU": "FIFO", "FIFO": "LRU"}


def _other_policy(cls: Any, at: int) -> Any:
    """``cls`` that takes the other policy than the one a program gives it (FIFO where it
    gives none: the class's default is LRU); ``at`` is the policy's place among the
    constructor's arguments. A claim of certainty must hold under both policies."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > at:
            args = (*args[:at], _OTHER_POLICY.get(args[at], args[at]), *args[at + 1 :])
        else:
            kwargs["policy"] = _OTHER_POLICY.get(kwargs.get("policy", "LRU"), kwargs.get("policy"))
        cls.__init__(self, *args, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})


def _configured(impl: Any) -> Any:
    """``impl`` whose tiers take the other policy than the program gives them (FIFO for LRU,
    LRU for FIFO), and whose hierarchy takes :data:`OTHER_MODEL`, :data:`OTHER_LINKS`, 37
    FLOP/s and chunks of 13 tokens in place of the class's own (the programs never spell
    them)."""
    if not isinstance(impl, dict):
        return _other_policy(impl, 1) if isinstance(impl, type) else impl
    impl = {**impl, "Tier": _other_policy(impl["Tier"], 1)}
    if "DiskTier" in impl:
        impl["DiskTier"] = _other_policy(impl["DiskTier"], 2)
    if "Hierarchy" not in impl:
        return impl
    h = impl["Hierarchy"]  # it hands its policy to its tiers, which take the other one
    other = {
        "model": OTHER_MODEL,
        "links": OTHER_LINKS,
        "flops": 37.0,
        "chunk_tokens": 13,
        "__module__": h.__module__,
    }
    return {**impl, "Hierarchy": type(h.__name__, (h,), other)}


REPLAY = TopicReplay(
    "KV offload",
    _offload_ns,
    _offload_state,
    _offload_value,
    ("ChunkTooLarge", "ChunkInUse", "ChunkNotFound", "ChunkNotPinned", "ChunkNotReferenced"),
    SEPARATING,
    subject="h",
    classes=("Tier", "DiskTier", "Hierarchy"),
    fields=_fields,
    subject_per_program=True,
    reader=kv_offload_reading,
    configured=_configured,
    hidden_fields=_hidden_fields,
)
"""How diagnosis replays this topic's programs: a program builds a tier (``tier``), a disk
tier (``disk``) or a hierarchy (``h``), and a report names the one it built."""
