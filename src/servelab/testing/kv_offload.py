"""Invariants of KV offload tiers, as an executable model and Hypothesis state machines.

The model is the rules written as plainly as they go. A tier is an ordered dict of resident
chunks (key -> bytes, next victim candidate first) with pin and reference counts; a chunk may
be evicted only when ``can_evict``: no pin and no reference beyond the tier's own. ``put``
decides before it changes anything: too large for the whole tier raises, not enough evictable
room is a miss (after ``wait`` pauses), otherwise the evictable chunks go in policy order until
it fits, and nothing more. The hierarchy stores into the first tier and cascades each tier's
victims into the next; ``lookup`` pins the longest found prefix, ``retrieve`` reads under a
reference, promotes what it found below the first tier while everything is still pinned, then
unpins.

Levels: 1 one tier without eviction (pins, references, ``can_evict``, ``remove``), 2 the
eviction loop and the bounded wait, 3 the hierarchy, 4 the cost model against the simulator.
Any class with the notebook's API is driven against the model; steps 3-4 pass the dict of the
tier, disk tier and hierarchy classes (:func:`hierarchy_class` builds the hierarchy on them).
"""

from __future__ import annotations

import builtins
import io
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from servelab.kv.offload.cost import (
    HOST_LINK,
    LLAMA_8B,
    NVME_LINK,
    PREFILL_FLOPS,
    Link,
    ModelShape,
    simulate_load,
    simulate_prefill,
)
from servelab.testing.core import InvariantViolation, RecordingMachine
from servelab.testing.kv_offload_held import held_bytes_message
from servelab.testing.offload_model import HierarchyModel, TierModel
from servelab.testing.power_cut import LateRename, power_cut, unsynced_renames

__all__ = [
    "INVARIANTS",
    "KEYS",
    "HierarchyModel",
    "LateRename",
    "TierModel",
    "crashing_writes",
    "hierarchy_class",
    "hierarchy_fields",
    "kv_offload_machine",
    "offload_fields",
    "payload_for",
    "power_cut",
    "tier_class_of",
    "tier_fields",
    "unsynced_renames",
]

KEYS = ("a", "b", "c", "d", "e", "f")

#: Every rule the machines check, by the id an :class:`InvariantViolation` carries.
INVARIANTS: dict[str, str] = {
    "can-evict": "can_evict = not pinned and ref_count == 1",
    "books": "bytes, keys, pins and references as the model counts them",
    "get": "get returns the chunk's KV, and None on a miss",
    "pin-refused": "pin of a chunk that is not resident raises",
    "unpin-refused": "unpin without a matching pin raises",
    "ref-refused": "ref of a chunk that is not resident raises",
    "unref-refused": "unref without a matching ref raises",
    "remove-refused": "remove of a chunk that is absent, pinned or referenced raises",
    "changed-on-error": "a call that raises changes nothing",
    "miss": "a put that cannot make room returns None",
    "victims": "evict in policy order, skip what can_evict refuses, stop once it fits",
    "bounded-wait": "a miss pauses exactly `wait` times first",
    "too-large": "a chunk larger than the tier raises ChunkTooLarge",
    "count-returned": "pin and unpin return the pin count, ref and unref the ref_count",
    "error-type": "each refused call raises the notebook's own error class",
    "store": "store cascades down",
    "lookup": "lookup pins the longest prefix",
    "retrieve": "retrieve returns the chunks' KV and promotes them",
    "held-bytes": "held_bytes counts each chunk once",
    "recompute": "recompute times equal the simulator's (2%)",
    "load": "load times equal the simulator's (2%)",
    "worth-loading": "worth_loading is load_seconds < recompute_seconds",
}


def payload_for(key: str, size: int) -> bytes:
    """A chunk's KV as the checks write it: ``size`` bytes that name their key."""
    return (key.encode() * size)[:size]


def tier_class_of(impl: Any) -> Any:
    """The tier class to grade: ``impl["Tier"]`` of the later steps' dict, else ``impl``."""
    if isinstance(impl, Mapping):
        return impl["Tier"]
    return getattr(impl, "tier_class", impl)


def hierarchy_class(impl: Any) -> Any:
    """The hierarchy class of the later steps' dict, built on the dict's own tier classes."""
    if not isinstance(impl, Mapping):
        return impl
    h = impl["Hierarchy"]
    bound = {"tier_class": impl["Tier"], "disk_class": impl["DiskTier"], "__module__": h.__module__}
    return type(h.__name__, (h,), bound)


class SimulatedCrash(OSError):
    """The machine went down in the middle of a write (see :func:`crashing_writes`)."""


@contextmanager
def crashing_writes(suffix: str = "") -> Iterator[list[str]]:
    """Inside the block, a file opened for writing whose name ends with ``suffix`` (any file
    by default) keeps half of the first write to it, then the machine "crashes"
    (:class:`SimulatedCrash`): what a kill or a power cut in mid-write leaves on disk. The
    crash ends the block (the program goes on as after a restart). A copy into such a file
    from a file in the same directory, made by the operating system (``shutil.copyfile``'s
    ``os.sendfile``), is cut the same way: a copy from another directory (a copy of the whole
    folder) is not a write of a chunk. Yields the names of the files it cut short."""
    real = builtins.open
    crashed: list[str] = []
    open_cut: dict[int, str] = {}  # file descriptor -> name, of the files open to be cut
    opened: dict[int, str] = {}  # file descriptor -> name, of every file opened in the block

    class Half:
        def __init__(self, f: Any, name: str) -> None:
            self._f, self._name, self._fd = f, name, f.fileno()
            open_cut[self._fd] = name

        def write(self, data: Any) -> int:
            data = bytes(data)
            self._f.write(data[: max(1, len(data) // 2)])
            self._f.flush()
            crashed.append(self._name)
            raise SimulatedCrash(f"the machine crashed while writing {Path(self._name).name}")

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: Any) -> None:
            self.close()

        def close(self) -> None:
            open_cut.pop(self._fd, None)
            self._f.close()

        def __getattr__(self, name: str) -> Any:
            return getattr(self._f, name)

    def crashing(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real(file, mode, *args, **kwargs)
        if hasattr(f, "fileno"):
            opened[f.fileno()] = str(file)
        cut = any(c in mode for c in "wax+") and str(file).endswith(suffix)
        return Half(f, str(file)) if cut else f

    def copying(real_copy: Any) -> Any:
        def copy(out_fd: int, in_fd: int, *args: Any, **kwargs: Any) -> Any:
            source = opened.get(in_fd)
            if out_fd not in open_cut or source is None:
                return real_copy(out_fd, in_fd, *args, **kwargs)
            if Path(source).parent != Path(open_cut[out_fd]).parent:
                return real_copy(out_fd, in_fd, *args, **kwargs)
            size = os.fstat(in_fd).st_size
            os.write(out_fd, os.pread(in_fd, max(1, size // 2), 0))
            crashed.append(open_cut[out_fd])
            name = Path(open_cut[out_fd]).name
            raise SimulatedCrash(f"the machine crashed while writing {name}")

        return copy

    copies = {n: getattr(os, n) for n in ("sendfile", "copy_file_range") if hasattr(os, n)}
    # In a notebook, `open` is IPython's wrapper, which calls the `io_open` it imported.
    shell = sys.modules.get("IPython.core.interactiveshell")
    builtins.open = io.open = crashing
    for n, real_copy in copies.items():
        setattr(os, n, copying(real_copy))
    if shell is not None and hasattr(shell, "io_open"):
        setattr(shell, "io_open", crashing)  # noqa: B010
    try:
        yield crashed
    except SimulatedCrash:
        pass
    finally:
        builtins.open = io.open = real
        for n, real_copy in copies.items():
            setattr(os, n, real_copy)
        if shell is not None and hasattr(shell, "io_open"):
            setattr(shell, "io_open", real)  # noqa: B010


def _read(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:
        return ("unreadable", type(exc).__name__)


def tier_fields(tier: Any) -> dict[str, Any]:
    """Everything a tier shows: resident keys in policy order, bytes, pins and references
    (read from the skeleton's ``_pins`` and ``_refs``, so counts of absent keys show too), and
    for a disk tier the files in its directory with their sizes."""
    fields = {
        "keys": _read(lambda: list(tier.keys())),
        "used": _read(lambda: tier.used),
        "pins": _read(lambda: {k: n for k, n in dict(tier._pins).items() if n}),
        "refs": _read(lambda: {k: n for k, n in dict(tier._refs).items() if n}),
    }
    root = getattr(tier, "root", None)
    if root is not None:
        fields["files"] = _read(
            lambda: {p.name: p.stat().st_size for p in sorted(Path(root).iterdir())}
        )
    return fields


def offload_fields(obj: Any) -> dict[str, Any]:
    """The fields of a hierarchy (anything with ``tiers``) or of one tier."""
    return hierarchy_fields(obj) if hasattr(obj, "tiers") else tier_fields(obj)


def hierarchy_fields(h: Any) -> dict[str, Any]:
    """Every tier's fields, by tier name, and the distinct bytes the hierarchy reports."""
    fields: dict[str, Any] = {}
    for t in _read(lambda: list(h.tiers)):
        for name, value in tier_fields(t).items():
            if name == "files":
                continue  # a temporary directory per object: compared where a probe asks
            fields[f"{getattr(t, 'name', '?')}.{name}"] = value
    fields["held_bytes"] = _read(h.held_bytes)
    return fields


def _compare(got: dict[str, Any], want: dict[str, Any], rule: str, what: str) -> None:
    diff = [f"{k} is {got.get(k)!r}, expected {v!r}" for k, v in want.items() if got.get(k) != v]
    if diff:
        raise InvariantViolation(rule, f"{what}: " + "; ".join(diff))


def _model_tier_fields(m: TierModel) -> dict[str, Any]:
    return {"keys": list(m.sizes), "used": m.used, "pins": dict(m.pins), "refs": dict(m.refs)}


def _errors(level: int) -> tuple[type[BaseException], ...]:
    return (ValueError, LookupError, RuntimeError, TypeError)


def kv_offload_machine(impl: Any, level: int) -> type[RecordingMachine]:
    """The state machine of ``level`` (1-2: one tier; 3: the hierarchy; 4: the cost model)."""
    if level <= 2:
        return _tier_machine(tier_class_of(impl), level)
    if level == 3:
        return _hierarchy_machine(hierarchy_class(impl))
    return _final_machine(hierarchy_class(impl))


def _tier_machine(cls: Any, level: int, capacity: int = 100) -> type[RecordingMachine]:
    sizes = st.one_of(st.integers(1, capacity // 4), st.integers(1, capacity))

    class TierMachine(RecordingMachine):
        @initialize(policy=st.sampled_from(["LRU", "FIFO"]))
        def create(self, policy: str) -> None:
            self.model = TierModel(capacity, policy)
            self.sleeps = 0
            self.tier = self.do(
                f"tier = Tier({capacity}, {policy!r})", lambda: cls(capacity, policy)
            )
            self.tier._sleep = self._sleep  # the busy wait's pause, counted

        def _sleep(self) -> None:
            self.sleeps += 1

        def _unchanged(self, before: dict[str, Any], code: str) -> None:
            after = tier_fields(self.tier)
            if after != before:
                changed = ", ".join(
                    f"{k} {before[k]!r} -> {after[k]!r}" for k in after if after[k] != before[k]
                )
                raise InvariantViolation("changed-on-error", f"{code} raised, but {changed}")

        @rule(key=st.sampled_from(KEYS), size=sizes, wait=st.sampled_from([0, 0, 2]))
        def put(self, key: str, size: int, wait: int) -> None:
            m = self.model
            fits_free = key in m.sizes or size <= capacity - m.used
            victims = m.victims(size) if key not in m.sizes else []
            if level < 2 and not fits_free and victims is not None:
                return  # step 1 builds no eviction: only puts that fit or cannot make room
            args = f"{key!r}, payload({key!r}, {size})" + (f", wait={wait}" if level >= 2 else "")
            code = f"tier.put({args})"
            payload = payload_for(key, size)
            self.sleeps = 0
            if level >= 2:
                result = self.do(code, lambda: self.tier.put(key, payload, wait=wait))
            else:
                result = self.do(code, lambda: self.tier.put(key, payload))
            want = m.put(key, size)
            if want is None:
                if result is not None:
                    raise InvariantViolation(
                        "miss",
                        f"{code} returned {result!r}, but no room can be made: every chunk "
                        f"it could evict is pinned or referenced; expected None (a miss)",
                    )
                if level >= 2 and self.sleeps != wait:
                    raise InvariantViolation(
                        "bounded-wait",
                        f"{code} paused {self.sleeps} times before its miss; expected {wait}",
                    )
                return
            if level >= 2 and self.sleeps:
                raise InvariantViolation(
                    "bounded-wait", f"{code} paused {self.sleeps} times, though it had room at once"
                )
            got = None if result is None else [k for k, _ in result]
            if got != want:
                raise InvariantViolation(
                    "victims", f"{code} evicted {got!r}; expected {want!r} (None is a miss)"
                )
            for k, p in result:
                if p != payload_for(k, len(p)) or not p:
                    raise InvariantViolation("victims", f"{code} returned {k!r} with {p!r}")

        @rule(key=st.sampled_from(KEYS), extra=st.integers(1, capacity))
        def put_too_large(self, key: str, extra: int) -> None:
            code = f"tier.put({key!r}, payload({key!r}, {capacity + extra}))"
            before = tier_fields(self.tier)
            try:
                self.do(code, lambda: self.tier.put(key, payload_for(key, capacity + extra)))
            except ValueError:
                self._unchanged(before, code)
                return
            raise InvariantViolation("too-large", f"{code} should raise: larger than the tier")

        @rule(key=st.sampled_from(KEYS))
        def get(self, key: str) -> None:
            code = f"tier.get({key!r})"
            got = self.do(code, lambda: self.tier.get(key))
            m = self.model
            want = None
            if key in m.sizes:
                m.touch(key)
                want = payload_for(key, m.sizes[key])
            if got != want:
                raise InvariantViolation("get", f"{code} returned {got!r}, expected {want!r}")

        def _count(self, kind: str, key: str, up: bool) -> None:
            m = self.model
            counts = m.pins if kind == "pin" else m.refs
            method = kind if up else f"un{kind}"
            code = f"tier.{method}({key!r})"
            before = tier_fields(self.tier)
            if key not in m.sizes or (not up and not counts.get(key)):
                try:
                    self.do(code, lambda: getattr(self.tier, method)(key))
                except _errors(level):
                    self._unchanged(before, code)
                    return
                why = "is not resident" if key not in m.sizes else f"has no {kind} to release"
                raise InvariantViolation(
                    f"{method}-refused", f"{code} returned normally, but {key!r} {why}"
                )
            self.do(code, lambda: getattr(self.tier, method)(key))
            if up:
                counts[key] = counts.get(key, 0) + 1
            else:
                HierarchyModel.release_one(counts, key)

        @rule(key=st.sampled_from(KEYS), up=st.booleans())
        def pin(self, key: str, up: bool) -> None:
            self._count("pin", key, up)

        @rule(key=st.sampled_from(KEYS), up=st.booleans())
        def ref(self, key: str, up: bool) -> None:
            self._count("ref", key, up)

        @rule(key=st.sampled_from(KEYS))
        def remove(self, key: str) -> None:
            m = self.model
            code = f"tier.remove({key!r})"
            before = tier_fields(self.tier)
            if key in m.sizes and m.can_evict(key):
                self.do(code, lambda: self.tier.remove(key))
                del m.sizes[key]
                return
            try:
                self.do(code, lambda: self.tier.remove(key))
            except _errors(level):
                self._unchanged(before, code)
                return
            why = "is not resident" if key not in m.sizes else "is pinned or referenced"
            raise InvariantViolation(
                "remove-refused", f"{code} returned normally, but {key!r} {why}"
            )

        def _refused_as(self, code: str, call: Any, names: tuple[str, ...], why: str) -> None:
            """``call`` must raise one of the error classes ``names`` and change nothing."""
            before = tier_fields(self.tier)
            try:
                self.do(code, call)
            except Exception as exc:
                if not any(c.__name__ in names for c in type(exc).__mro__):
                    raise InvariantViolation(
                        "error-type",
                        f"{code} raised {type(exc).__name__}; expected {' or '.join(names)} "
                        f"({why})",
                    ) from exc
                self._unchanged(before, code)
                return
            raise InvariantViolation(
                "error-type", f"{code} returned normally; expected {' or '.join(names)} ({why})"
            )

        @rule(data=st.data(), which=st.integers(0, 2))
        def stated_contract(self, data: st.DataObject, which: int) -> None:
            # One rule for what the notebook states of each call and no other rule draws: the
            # counts returned, each refusal's error class, and a chunk exactly the size of the
            # free bytes (it fits); one rule, so the other rules keep their share of a program
            if which == 0:
                kind = data.draw(st.sampled_from(["pin", "ref"]), label="kind")
                self.count_returned(data, kind, data.draw(st.booleans(), label="release"))
            elif which == 1:
                methods = ["pin", "ref", "unpin", "unref", "unpin", "unref", "remove", "put"]
                self.refused_with_its_error(data, data.draw(st.sampled_from(methods), "method"))
            else:
                m = self.model
                room = capacity - m.used
                absent = [k for k in KEYS if k not in m.sizes]
                if room > 0 and absent:
                    key = data.draw(st.sampled_from(absent), label="key")
                    self.put(key, room, 0)

        def count_returned(self, data: st.DataObject, kind: str, release: bool) -> None:
            # "Each returns the new count (ref/unref return ref_count)": a pin or ref of a
            # resident chunk, then (sometimes) its release, each compared with the model
            m = self.model
            if not m.sizes:
                return
            key = data.draw(st.sampled_from(sorted(m.sizes)), label="key")
            counts = m.pins if kind == "pin" else m.refs
            for method in (kind, f"un{kind}") if release else (kind,):
                code = f"tier.{method}({key!r})"
                got = self.do(code, partial(getattr(self.tier, method), key))
                if method == kind:
                    counts[key] = counts.get(key, 0) + 1
                else:
                    HierarchyModel.release_one(counts, key)
                want = counts.get(key, 0) + (1 if kind == "ref" else 0)
                if got != want:
                    what = "the pin count" if kind == "pin" else "ref_count (1 + transfers)"
                    raise InvariantViolation(
                        "count-returned", f"{code} returned {got!r}; expected {want}, {what} now"
                    )

        def refused_with_its_error(self, data: st.DataObject, method: str) -> None:
            # The notebook names each refusal's class: ChunkNotFound for an absent chunk,
            # ChunkNotPinned / ChunkNotReferenced below zero, ChunkInUse for a held chunk's
            # remove, ChunkTooLarge for a chunk larger than the tier
            m = self.model
            # mostly a resident chunk: its refusals depend on its counts
            resident = bool(m.sizes) and data.draw(st.integers(0, 3), label="resident") > 0
            pool = sorted(m.sizes) if resident else [k for k in KEYS if k not in m.sizes]
            if not pool:
                return
            key = data.draw(st.sampled_from(pool), label="key")
            code = f"tier.{method}({key!r})"
            call = lambda: getattr(self.tier, method)(key)  # noqa: E731
            below = {"unpin": "ChunkNotPinned", "unref": "ChunkNotReferenced"}
            if method == "put":
                size = capacity + 1
                code = f"tier.put({key!r}, payload({key!r}, {size}))"
                payload = payload_for(key, size)
                self._refused_as(
                    code,
                    lambda: self.tier.put(key, payload),
                    ("ChunkTooLarge",),
                    "larger than the whole tier",
                )
            elif key not in m.sizes:
                # an absent chunk has no hold either: its release may say so instead
                names = ("ChunkNotFound", below[method]) if method in below else ("ChunkNotFound",)
                self._refused_as(code, call, names, f"{key!r} is not resident")
            elif method in below:
                counts = m.pins if method == "unpin" else m.refs
                if not counts.get(key):
                    self._refused_as(code, call, (below[method],), f"{key!r} has none to release")
            elif method == "remove" and not m.can_evict(key):
                self._refused_as(code, call, ("ChunkInUse",), f"{key!r} is pinned or referenced")

        @invariant()
        def agrees_with_model(self) -> None:
            if not hasattr(self, "tier"):
                return
            _compare(tier_fields(self.tier), _model_tier_fields(self.model), "books", "the tier")
            for k in KEYS:
                want = k in self.model.sizes and self.model.can_evict(k)
                if k in self.model.sizes and bool(self.tier.can_evict(k)) != want:
                    raise InvariantViolation(
                        "can-evict",
                        f"tier.can_evict({k!r}) is {not want}, but it is pinned "
                        f"{self.model.pins.get(k, 0)}x and referenced "
                        f"{1 + self.model.refs.get(k, 0)}x",
                    )

    TierMachine.__name__ = f"TierMachine_level{level}"
    return TierMachine


def _hierarchy_machine(cls: Any) -> type[RecordingMachine]:
    cpu, disk = 60, 120
    sizes = st.integers(5, 40)

    class HierarchyMachine(RecordingMachine):
        @initialize()
        def create(self) -> None:
            self.model = HierarchyModel([TierModel(cpu), TierModel(disk)])
            self.h = self.do(f"h = Hierarchy({cpu}, {disk})", lambda: cls(cpu, disk))
            self.open: list[tuple[str, list[Any], list[tuple[str, int]]]] = []
            self.sizes: dict[str, int] = {}

        @rule(key=st.sampled_from(KEYS), size=sizes)
        def store(self, key: str, size: int) -> None:
            size = self.sizes.setdefault(key, size)  # a chunk's KV never changes size
            code = f"h.store({key!r}, payload({key!r}, {size}))"
            got = self.do(code, lambda: self.h.store(key, payload_for(key, size)))
            want = self.model.store(key, size)
            if bool(got) != want:
                raise InvariantViolation(
                    "store", f"{code} returned {got!r}; expected {want} (False is a miss)"
                )

        @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
        def lookup(self, keys: list[str]) -> None:
            name = f"found{len(self.open)}"
            code = f"{name} = h.lookup({keys!r})"
            got = self.do(code, lambda: self.h.lookup(keys))
            want = self.model.lookup(keys)
            if [k for k, *_ in got] != [k for k, _ in want]:
                raise InvariantViolation(
                    "lookup",
                    f"{code} found {[k for k, *_ in got]!r}; expected the longest prefix "
                    f"held by some tier, {[k for k, _ in want]!r}",
                )
            self.open.append((name, got, want))

        @precondition(lambda self: bool(self.model.tiers[1].sizes))
        @rule(data=st.data())
        def release_from_disk(self, data: st.DataObject) -> None:
            # A release must unpin each chunk in the tier its lookup pinned it in: a chunk
            # found on disk shows whether it does, and random programs seldom look one up
            # and release it before the next store moves it.
            key = data.draw(st.sampled_from(sorted(self.model.tiers[1].sizes)), label="key")
            self.lookup([key])
            name, got, want = self.open.pop()
            self.do(f"h.release({name})", lambda: self.h.release(got))
            self.model.release(want)

        @precondition(lambda self: bool(self.open))
        @rule(data=st.data(), retrieve=st.booleans())
        def finish(self, data: st.DataObject, retrieve: bool) -> None:
            index = data.draw(st.integers(0, len(self.open) - 1), label="which")
            name, got, want = self.open.pop(index)
            if not retrieve:
                self.do(f"h.release({name})", lambda: self.h.release(got))
                self.model.release(want)
                return
            code = f"h.retrieve({name})"
            payloads = self.do(code, lambda: self.h.retrieve(got))
            keys = self.model.retrieve(want)
            expected = [payload_for(k, self.sizes[k]) for k in keys]
            if list(payloads or []) != expected:
                raise InvariantViolation(
                    "retrieve",
                    f"{code} returned {payloads!r}; expected the chunks' KV {expected!r}",
                )

        @invariant()
        def agrees_with_model(self) -> None:
            if not hasattr(self, "h"):
                return
            got = hierarchy_fields(self.h)
            want: dict[str, Any] = {}
            for name, m in zip(("cpu", "disk"), self.model.tiers, strict=True):
                for k, v in _model_tier_fields(m).items():
                    want[f"{name}.{k}"] = v
            held = self.model.held_bytes()
            message = held_bytes_message(got, self.sizes, held)
            if message is not None:
                raise InvariantViolation("held-bytes", message)
            want["held_bytes"] = held
            _compare(got, want, "books", "the tiers")

    return HierarchyMachine


def _cost_machine(cls: Any) -> type[RecordingMachine]:
    models = st.builds(
        ModelShape,
        params=st.sampled_from([1e9, 8e9, 70e9]),
        layers=st.sampled_from([16, 32, 80]),
        d_model=st.sampled_from([2048, 4096, 8192]),
        kv_heads=st.sampled_from([4, 8, 32]),
        head_dim=st.sampled_from([64, 128]),
        bytes_per_value=st.sampled_from([1, 2, 4]),
    )
    links = st.builds(
        Link,
        name=st.sampled_from(["cpu", "disk"]),
        bandwidth=st.sampled_from([2e9, 7e9, 25e9, 50e9]),
        latency_s=st.sampled_from([0.0, 10e-6, 100e-6, 1e-3]),
    )
    tokens = st.integers(256, 16_384)

    class CostMachine(RecordingMachine):
        @initialize()
        def create(self) -> None:
            self.h = self.do("h = Hierarchy(1000, 1000)", lambda: cls(1000, 1000))
            self.shape, self.flops = LLAMA_8B, PREFILL_FLOPS
            self.links = {"cpu": HOST_LINK, "disk": NVME_LINK}

        @rule(model=models, flops=st.sampled_from([100e12, 400e12, 900e12]))
        def set_model(self, model: ModelShape, flops: float) -> None:
            self.do(f"h.model = {model!r}", lambda: setattr(self.h, "model", model))
            self.do(f"h.flops = {flops!r}", lambda: setattr(self.h, "flops", flops))
            self.shape, self.flops = model, flops

        @rule(link=links)
        def set_link(self, link: Link) -> None:
            code = f"h.links = {{**h.links, {link.name!r}: {link!r}}}"
            self.do(code, lambda: setattr(self.h, "links", {**self.h.links, link.name: link}))
            self.links = {**self.links, link.name: link}

        @rule(n=tokens)
        def recompute(self, n: int) -> None:
            code = f"h.recompute_seconds({n})"
            got = self.do(code, lambda: self.h.recompute_seconds(n))
            want = simulate_prefill(self.shape, 0, n, self.flops)
            _close(code, got, want, "recompute")

        @rule(n=tokens, tier=st.sampled_from(["cpu", "disk"]))
        def load(self, n: int, tier: str) -> None:
            code = f"h.load_seconds({n}, {tier!r})"
            got = self.do(code, lambda: self.h.load_seconds(n, tier))
            want = simulate_load(self.shape, n, self.links[tier], 256)
            _close(code, got, want, "load")
            recompute = simulate_prefill(self.shape, 0, n, self.flops)
            if abs(want - recompute) > 0.05 * recompute:  # a clear case either way
                code = f"h.worth_loading({n}, {tier!r})"
                verdict = self.do(code, lambda: self.h.worth_loading(n, tier))
                if bool(verdict) != (want < recompute):
                    raise InvariantViolation(
                        "worth-loading",
                        f"{code} is {verdict!r}, but loading takes {want:.3g} s and "
                        f"recomputing {recompute:.3g} s",
                    )

    return CostMachine


def _final_machine(cls: Any) -> type[RecordingMachine]:
    """The last step's machine: the cost model's rules on the hierarchy of step 3, which it
    keeps checking, less often than step 3's machine (the grade of every step runs that too)."""
    hierarchy, cost = _hierarchy_machine(cls), _cost_machine(cls)

    class FinalMachine(hierarchy, cost):  # type: ignore[valid-type, misc]
        @initialize()
        def create(self) -> None:
            hierarchy.create(self)  # type: ignore[attr-defined]
            self.shape, self.flops = LLAMA_8B, PREFILL_FLOPS
            self.links = {"cpu": HOST_LINK, "disk": NVME_LINK}

    return FinalMachine


def _close(code: str, got: Any, want: float, rule: str) -> None:
    if not isinstance(got, (int, float)) or isinstance(got, bool) or not got == got:
        raise InvariantViolation(rule, f"{code} returned {got!r}, not a number of seconds")
    if abs(got - want) > 0.02 * want:
        raise InvariantViolation(
            rule, f"{code} is {got:.4g} s; the simulator takes {want:.4g} s (2% tolerance)"
        )
