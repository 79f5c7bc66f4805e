"""Checkpoints of the 'kv-offload' course notebook: its solution, step by step.

Generated from solutions/06_kv_offload_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('kv-offload', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


import os
import re
import shutil
import tempfile
import time
from collections import OrderedDict
from copy import deepcopy
from pathlib import Path
from servelab.kv.offload.cost import HOST_LINK, LLAMA_8B, NVME_LINK, PREFILL_FLOPS
from servelab.kv.offload.errors import ChunkInUse, ChunkNotFound, ChunkNotPinned, ChunkNotReferenced
from servelab.kv.offload.errors import ChunkTooLarge
from servelab.testing.kv_offload import payload_for as payload
from servelab.viz import render_tiers


class TierSkeleton:
    """One tier's books and a read-only view of them; the steps below add the behaviour."""

    def __init__(self, capacity_bytes, policy="LRU", name="cpu"):
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) or capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be a positive int, got {capacity_bytes!r}")
        if policy not in ("LRU", "FIFO"):
            raise ValueError(f"policy must be 'LRU' or 'FIFO', got {policy!r}")
        self.capacity = capacity_bytes
        self.policy = policy
        self.name = name
        self._sizes = OrderedDict()  # key -> bytes, in policy order: the next victim candidate first
        self._data = {}  # key -> this tier's copy (what _write returned)
        self._pins = {}  # key -> lookups holding it until their retrieve completes
        self._refs = {}  # key -> transfers reading it, beyond the tier's own reference
        self._used = 0
        self.interval_s = 0.0  # the busy wait's pause between two tries

    # --- storage: bytes in memory here; the disk tier of step 3 writes files ---
    def _write(self, key, payload):
        return bytes(payload)

    def _read(self, key):
        return self._data[key]

    def _drop(self, key):
        del self._data[key]

    def _sleep(self):
        time.sleep(self.interval_s)

    def _payload_size(self, payload):
        if not isinstance(payload, (bytes, bytearray)) or not payload:
            raise TypeError(f"a chunk is non-empty bytes, got {type(payload).__name__}")
        return len(payload)

    def _resident(self, key, action):
        if key not in self._sizes:
            raise ChunkNotFound(f"cannot {action} {key!r}: it is not in the {self.name} tier")

    # --- inspection: reads only ---
    @property
    def used(self):
        return self._used

    @property
    def free(self):
        return self.capacity - self._used

    def keys(self):
        """Resident keys in policy order: the next victim candidate first."""
        return list(self._sizes)

    def size_of(self, key):
        return self._sizes[key]

    def pin_count(self, key):
        return self._pins.get(key, 0)

    def ref_count(self, key):
        """1 (the tier's own reference) plus the transfers reading it; 0 when absent."""
        return 1 + self._refs.get(key, 0) if key in self._sizes else 0

    def __contains__(self, key):
        return key in self._sizes

    def __len__(self):
        return len(self._sizes)

    def eviction_order(self):
        return [key for key in self._sizes if self.can_evict(key)]

    def __repr__(self):
        return f"{type(self).__name__}({self.name}: {self._used} of {self.capacity} B, {self.keys()})"

    def _repr_svg_(self):
        return render_tiers(self)


class PinnedTier(TierSkeleton):
    def can_evict(self, key):
        """LMCache's rule: not pinned by a lookup, and no reference but the tier's own."""
        return self.pin_count(key) == 0 and self.ref_count(key) == 1

    def pin(self, key):
        """A lookup found `key`: hold it until the retrieve completes. Returns the pin count."""
        self._resident(key, "pin")
        self._pins[key] = self._pins.get(key, 0) + 1
        return self._pins[key]

    def unpin(self, key):
        """The retrieve completed (or the request went away). Returns the pins left."""
        self._resident(key, "unpin")
        left = self._pins.get(key, 0) - 1
        if left < 0:
            raise ChunkNotPinned(f"{key!r} is not pinned: unpin() without pin()")
        if left:
            self._pins[key] = left
        else:
            del self._pins[key]
        return left

    def ref(self, key):
        """A transfer starts reading `key`. Returns the reference count."""
        self._resident(key, "ref")
        self._refs[key] = self._refs.get(key, 0) + 1
        return self.ref_count(key)

    def unref(self, key):
        """The transfer finished. Returns the reference count."""
        self._resident(key, "unref")
        left = self._refs.get(key, 0) - 1
        if left < 0:
            raise ChunkNotReferenced(f"{key!r} has only the tier's own reference")
        if left:
            self._refs[key] = left
        else:
            del self._refs[key]
        return self.ref_count(key)

    def get(self, key):
        """This tier's copy of `key` (under LRU now the most recently used), or None."""
        if key not in self._sizes:
            return None
        if self.policy == "LRU":
            self._sizes.move_to_end(key)
        return self._read(key)

    def put(self, key, payload):
        """Store `payload` under `key` if it fits in the free bytes: [] (no victims), or None."""
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} takes {size} B, more than the whole {self.capacity} B tier")
        if key in self._sizes:
            self.get(key)  # already here: a use, not a second copy
            return []
        if size > self.free:
            return None
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return []

    def remove(self, key):
        """Free `key` on purpose; ChunkInUse while a lookup or a transfer holds it."""
        self._resident(key, "remove")
        if not self.can_evict(key):
            raise ChunkInUse(
                f"{key!r} is pinned {self.pin_count(key)}x and referenced {self.ref_count(key)}x"
            )
        self._discard(key)

    def _discard(self, key):
        """Forget `key` and free its copy (the caller checked can_evict)."""
        self._used -= self._sizes.pop(key)
        self._drop(key)


class EvictingTier(PinnedTier):
    def put(self, key, payload, wait=0):
        """Allocate, evict, retry: the evicted (key, payload) pairs, or None (a miss)."""
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} takes {size} B, more than the whole {self.capacity} B tier")
        if key in self._sizes:
            self.get(key)
            return []
        for attempt in range(wait + 1):
            if attempt:
                self._sleep()
            victims = self._choose_victims(size)
            if victims is not None:
                break
        else:
            return None
        evicted = [(v, self._read(v)) for v in victims]
        copy = self._write(key, payload)  # may fail: nothing has changed yet
        for v in victims:
            self._discard(v)
        self._data[key] = copy
        self._sizes[key] = size
        self._used += size
        return evicted

    def _choose_victims(self, size):
        """Chunks to evict, in policy order, skipping what can_evict refuses; None if no room."""
        need = size - self.free
        victims = []
        for key in self._sizes:
            if need <= 0:
                break
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 0 else None


class DiskSkeleton(EvictingTier):
    """A tier of chunk files in a directory (a fresh temporary one when `root` is None)."""

    def __init__(self, capacity_bytes, root=None, policy="LRU", name="disk"):
        super().__init__(capacity_bytes, policy, name)
        if root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="servelab-kv-")
            root = self._tmp.name
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def __deepcopy__(self, memo):
        """A copy with a fresh folder of its own holding copies of this tier's files, so that
        what the copy writes or deletes never touches this tier's chunks."""
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        kept = {k: v for k, v in vars(self).items() if k not in ("_tmp", "root", "_data")}
        vars(clone).update(deepcopy(kept, memo))
        clone._tmp = tempfile.TemporaryDirectory(prefix="servelab-kv-")
        clone.root = Path(clone._tmp.name)
        if self.root.is_dir():
            shutil.copytree(self.root, clone.root, dirs_exist_ok=True)
        clone._data = {
            key: clone.root / where.relative_to(self.root)
            if isinstance(where, Path) and where.is_relative_to(self.root)
            else deepcopy(where, memo)
            for key, where in self._data.items()
        }
        return clone

    def path(self, key):
        if not re.fullmatch(r"[\w-]+", str(key)):
            raise ValueError(f"a chunk key names a file: letters, digits, - and _, got {key!r}")
        return self.root / f"{key}.chunk"

    def _read(self, key):
        return self._data[key].read_bytes()

    def _drop(self, key):
        self._data.pop(key).unlink(missing_ok=True)


class DiskTier(DiskSkeleton):
    def _write(self, key, payload):
        """Write the chunk's file so that a crash leaves it absent or whole; return its path."""
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, final)
        return final


class HierarchySkeleton:
    """KV tiers under the GPU, fastest first: a CPU tier over a disk tier."""

    tier_class = EvictingTier
    disk_class = DiskTier
    # the cost model of step 4: a Llama-3-8B-shaped model, notebook 04's FLOP/s, two links
    model = LLAMA_8B
    flops = PREFILL_FLOPS
    links = {"cpu": HOST_LINK, "disk": NVME_LINK}
    chunk_tokens = 256

    def __init__(self, cpu_bytes, disk_bytes, root=None, policy="LRU"):
        self.tiers = [
            self.tier_class(cpu_bytes, policy, name="cpu"),
            self.disk_class(disk_bytes, root, policy, name="disk"),
        ]

    def where(self, key):
        """Names of the tiers holding a copy of `key`, fastest first."""
        return [t.name for t in self.tiers if key in t]

    def tier_bytes(self):
        return {t.name: t.used for t in self.tiers}

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(map(repr, self.tiers))})"

    def _repr_svg_(self):
        return render_tiers(self)


class Hierarchy(HierarchySkeleton):
    def store(self, key, payload):
        """Offload a chunk the GPU reclaimed; False when the CPU tier made no room (a miss)."""
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return False
        self._cascade(1, evicted)
        return True

    def _cascade(self, start, chunks):
        """Write evicted (key, payload) pairs into the tiers from `start` down. A victim a
        tier has no room for, or larger than the whole tier, is dropped: the tiers above have
        changed already, so raising here would leave the store half done."""
        for tier in self.tiers[start:]:
            below = []
            for key, payload in chunks:
                if key not in tier and len(payload) <= tier.capacity:
                    below += tier.put(key, payload) or []
            chunks = below

    def lookup(self, keys):
        """Pin the longest prefix of `keys` that some tier holds: [(key, tier index), ...]."""
        found = []
        for key in keys:
            where = next((i for i, t in enumerate(self.tiers) if key in t), None)
            if where is None:
                break
            self.tiers[where].pin(key)
            found.append((key, where))
        return found

    def retrieve(self, found):
        """The chunks' payloads in order; promote those found below the CPU tier, then unpin."""
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)  # a transfer reads this copy
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads):
            if i > 0 and key not in top and len(payload) <= top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        for key, i in found:
            self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        return payloads

    def release(self, found):
        """Drop a lookup's pins without reading."""
        for key, i in found:
            self.tiers[i].unpin(key)

    def held_bytes(self):
        """Bytes of KV the node holds, each chunk once however many tiers have a copy."""
        sizes = {}
        for tier in self.tiers:
            for key in tier.keys():
                sizes[key] = tier.size_of(key)
        return sum(sizes.values())


class CostAwareHierarchy(Hierarchy):
    def recompute_seconds(self, tokens):
        """Seconds to prefill `tokens` tokens from nothing."""
        m = self.model
        return (2 * m.params * tokens + 2 * m.layers * m.d_model * tokens * tokens) / self.flops

    def load_seconds(self, tokens, tier):
        """Seconds to bring `tokens` tokens of KV from the tier named `tier`."""
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv_bytes / link.bandwidth

    def worth_loading(self, tokens, tier):
        """Whether loading those tokens from `tier` beats recomputing them."""
        return self.load_seconds(tokens, tier) < self.recompute_seconds(tokens)


TOPIC = 'kv-offload'
STEPS = {
    1: lambda: PinnedTier,
    2: lambda: EvictingTier,
    3: lambda: {"Tier": EvictingTier, "DiskTier": DiskTier, "Hierarchy": Hierarchy},
    4: lambda: {"Tier": EvictingTier, "DiskTier": DiskTier, "Hierarchy": CostAwareHierarchy},
}
