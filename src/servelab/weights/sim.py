"""Replay request traces through weight caches: hit rate, bytes loaded and cold-start time.

A weight cache is worth exactly the load time it saves, so this module turns a request trace
into the three numbers that decide a cache design: the object miss ratio (how many requests
waited for a load), the byte miss ratio (how many bytes were loaded) and the cold-start
seconds those bytes cost from local NVMe or from object storage.

Every node here is *must-admit*: a serving node always loads the model it was asked for, so a
miss is followed by as many evictions as the new model needs. Traces are seeded synthetic Zipf
requests over a catalogue of model sizes from 1 GB to 140 GB; the offline Belady replays are
heuristics with foresight (with mixed sizes, not bounds); a :func:`simulate_fleet` puts N
nodes behind a router to show that routing, not the cache, decides the hit rate when requests
for a model are scattered over the fleet.
"""

from __future__ import annotations

import heapq
import random
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Literal, Protocol

from servelab.native import mypyc_attr
from servelab.weights.policies import EvictionPolicy

__all__ = [
    "DEFAULT_SIZES_GB",
    "GB",
    "Bandwidths",
    "CountLimitedNode",
    "Model",
    "Node",
    "PolicyNode",
    "Request",
    "SimResult",
    "belady",
    "drifting_zipf_trace",
    "fleet",
    "model_catalogue",
    "replay",
    "replay_libcachesim",
    "simulate_fleet",
    "zipf_trace",
]

GB = 10**9
"""Bytes in a gigabyte (decimal, as disks and bandwidths are quoted)."""

DEFAULT_SIZES_GB: tuple[int, ...] = (1, 2, 4, 8, 14, 16, 26, 48, 64, 90, 140)
"""Weight sizes of common open models in fp16/bf16: 0.5B … 7B, 8B, 13B, 24B, 32B, 8x7B, 70B."""

PROGRESS_AFTER = 200_000
"""Replays at least this long show a progress bar when ``progress`` is left as None."""


@dataclass(frozen=True)
class Model:
    """A model a node can serve: its id and the bytes its weights take."""

    name: str
    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size <= 0:
            raise ValueError(f"model {self.name!r}: size must be a positive int, got {self.size!r}")


Request = Model
"""A request names the model it needs; the trace is simply the sequence of those models."""


@dataclass(frozen=True)
class Bandwidths:
    """Where a missed model is loaded from, in bytes per second (defaults: 6 GB/s, 1 GB/s)."""

    nvme: float = 6.0 * GB
    object_storage: float = 1.0 * GB

    def __post_init__(self) -> None:
        if self.nvme <= 0 or self.object_storage <= 0:
            raise ValueError(f"bandwidths must be positive, got {self}")


@dataclass
class SimResult:
    """What a replay measured. Ratios are over requests (objects) and over requested bytes."""

    name: str
    requests: int = 0
    hits: int = 0
    bytes_requested: int = 0
    bytes_missed: int = 0
    evictions: int = 0
    peak_resident_bytes: int = 0
    bandwidths: Bandwidths = field(default_factory=Bandwidths)

    @property
    def misses(self) -> int:
        return self.requests - self.hits

    @property
    def object_miss_ratio(self) -> float:
        return self.misses / self.requests if self.requests else 0.0

    @property
    def byte_miss_ratio(self) -> float:
        return self.bytes_missed / self.bytes_requested if self.bytes_requested else 0.0

    @property
    def hit_ratio(self) -> float:
        return 1.0 - self.object_miss_ratio if self.requests else 0.0

    def cold_start_seconds(self, bytes_per_second: float) -> float:
        """Total seconds spent loading missed models at ``bytes_per_second``."""
        if bytes_per_second <= 0:
            raise ValueError(f"bandwidth must be positive, got {bytes_per_second}")
        return self.bytes_missed / bytes_per_second

    @property
    def cold_start_s_nvme(self) -> float:
        return self.cold_start_seconds(self.bandwidths.nvme)

    @property
    def cold_start_s_object_storage(self) -> float:
        return self.cold_start_seconds(self.bandwidths.object_storage)

    def row(self) -> dict[str, Any]:
        """The result as a flat dict, ready for a table."""
        return {
            "name": self.name,
            "requests": self.requests,
            "object_miss_ratio": round(self.object_miss_ratio, 4),
            "byte_miss_ratio": round(self.byte_miss_ratio, 4),
            "cold_start_s_nvme": round(self.cold_start_s_nvme, 1),
            "cold_start_s_object_storage": round(self.cold_start_s_object_storage, 1),
            "evictions": self.evictions,
        }


# --------------------------------------------------------------------------- traces


def model_catalogue(
    n_models: int = 40, *, sizes_gb: Sequence[float] = DEFAULT_SIZES_GB, seed: int = 0
) -> tuple[Model, ...]:
    """``n_models`` models whose sizes are drawn (seeded) from ``sizes_gb``.

    Names carry the size (``m07-14g``) so a table of results reads without a lookup.
    """
    if n_models <= 0:
        raise ValueError(f"n_models must be positive, got {n_models}")
    if not sizes_gb or any(s <= 0 for s in sizes_gb):
        raise ValueError(f"sizes_gb must be a non-empty list of positive sizes, got {sizes_gb}")
    rng = random.Random(seed)
    models = []
    for i in range(n_models):
        size_gb = rng.choice(list(sizes_gb))
        models.append(Model(f"m{i:02d}-{size_gb:g}g", int(size_gb * GB)))
    return tuple(models)


def zipf_trace(
    models: Sequence[Model], n_requests: int, *, alpha: float = 0.9, seed: int = 0
) -> list[Model]:
    """``n_requests`` requests drawn from a Zipf(``alpha``) popularity over ``models``.

    The popularity ranks are a seeded shuffle of ``models``, so a model's size and its
    popularity are independent (a 70B model may well be the most requested one).
    """
    if not models:
        raise ValueError("models must not be empty")
    if n_requests < 0:
        raise ValueError(f"n_requests must be >= 0, got {n_requests}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    rng = random.Random(seed)
    ranked = list(models)
    rng.shuffle(ranked)
    weights = [1.0 / (rank**alpha) for rank in range(1, len(ranked) + 1)]
    return rng.choices(ranked, cum_weights=list(accumulate(weights)), k=n_requests)


# --------------------------------------------------------------------------- nodes


class Node(Protocol):
    """A must-admit cache a trace can be replayed through."""

    name: str
    evictions: int

    def access(self, key: str, size: int) -> bool:
        """Serve a request: True on a hit; on a miss, evict as needed and load the model."""
        ...

    def __contains__(self, key: object) -> bool: ...

    @property
    def resident_bytes(self) -> int: ...


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class PolicyNode:
    """A node with a byte budget whose victims are chosen by any :class:`EvictionPolicy`.

    The lean core of a weight cache (no values, no pins) so that long replays stay fast; it
    drives the policy through the same events as :class:`~servelab.weights.cache.WeightCache`.
    """

    def __init__(self, capacity_bytes: int, policy: EvictionPolicy[str], name: str = "") -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
        if len(policy):
            raise ValueError("the policy must be fresh (it already holds keys)")
        self.capacity = capacity_bytes
        self.policy = policy
        self.name = name or f"{policy.name} {capacity_bytes / GB:g} GB"
        self.evictions = 0
        self._sizes: dict[str, int] = {}
        self._used = 0
        # Emptied before each eviction, as the cache does: it holds only that eviction's pops
        # (a node never takes them back), so it never grows with the length of the trace.
        self._undo = policy.undo_log()

    def __contains__(self, key: object) -> bool:
        return key in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def resident_bytes(self) -> int:
        return self._used

    def access(self, key: str, size: int) -> bool:
        sizes = self._sizes
        if key in sizes:
            self.policy.update_on_hit(key)
            return True
        if size > self.capacity:
            raise ValueError(
                f"{key!r} needs {size} B but the node holds {self.capacity} B; "
                "raise the capacity or do not route this model here"
            )
        if self._undo is not None:
            self._undo.clear()
        policy = self.policy  # its methods called on it, not hoisted: compiled, a direct C call
        while self._used + size > self.capacity:
            victim = policy.pop_victim()
            self._used -= sizes.pop(victim)
            self.evictions += 1
        sizes[key] = size
        self._used += size
        policy.update_on_put(key, size)
        return False


class CountLimitedNode:
    """The common mistake: a cache that holds ``max_models`` entries whatever their size.

    Kept to show what a count does to a disk: sized for 7B models it overflows the node when
    a 70B model arrives; sized for the 70B model it holds so few entries that hits collapse.
    """

    def __init__(self, max_models: int, policy: EvictionPolicy[str], name: str = "") -> None:
        if max_models <= 0:
            raise ValueError(f"max_models must be positive, got {max_models}")
        self._inner = PolicyNode(max_models, policy)
        self._sizes: dict[str, int] = {}
        self._used = 0
        self.name = name or f"{policy.name} × {max_models} models"

    @property
    def evictions(self) -> int:
        return self._inner.evictions

    def __contains__(self, key: object) -> bool:
        return key in self._inner

    @property
    def resident_bytes(self) -> int:
        return sum(self._sizes[k] for k in self._sizes if k in self._inner)

    def access(self, key: str, size: int) -> bool:
        hit = self._inner.access(key, 1)
        if not hit:
            self._sizes[key] = size
            # forget the sizes of models the count-limited cache dropped
            for gone in [k for k in self._sizes if k not in self._inner]:
                del self._sizes[gone]
        return hit


# --------------------------------------------------------------------------- replay


def _progress(items: Sequence[Any], enabled: bool | None, desc: str) -> Iterable[Any]:
    """Wrap ``items`` in a tqdm bar when asked (or when long); tqdm is optional."""
    if enabled is None:
        enabled = len(items) >= PROGRESS_AFTER
    if not enabled:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the bar is a convenience, never a dependency
        return items
    return tqdm(items, desc=desc, unit="req", mininterval=0.5, leave=False)  # type: ignore[no-any-return]


def replay(
    trace: Sequence[Model],
    node: Node,
    *,
    bandwidths: Bandwidths | None = None,
    progress: bool | None = None,
) -> SimResult:
    """Replay ``trace`` through ``node`` and measure it.

    ``progress`` shows a tqdm bar (None: only for traces of at least 200,000 requests).
    """
    result = SimResult(node.name, bandwidths=bandwidths or Bandwidths())
    hits = bytes_requested = bytes_missed = 0
    peak = node.resident_bytes
    access = node.access
    model: Model  # compiled, a typed name reads ``name`` and ``size`` as C slots, not by name
    for model in _progress(trace, progress, node.name):
        size = model.size
        bytes_requested += size
        if access(model.name, size):
            hits += 1
        else:
            bytes_missed += size
            resident = node.resident_bytes
            if resident > peak:
                peak = resident
    result.requests = len(trace)
    result.hits = hits
    result.bytes_requested = bytes_requested
    result.bytes_missed = bytes_missed
    result.evictions = node.evictions
    result.peak_resident_bytes = peak
    return result


def _next_uses(trace: Sequence[Model]) -> list[int]:
    """For each request, the index of the next request for the same model (len: never)."""
    never = len(trace)
    nxt = [never] * len(trace)
    last: dict[str, int] = {}
    for i in range(len(trace) - 1, -1, -1):
        name = trace[i].name
        nxt[i] = last.get(name, never)
        last[name] = i
    return nxt


def belady(
    trace: Sequence[Model],
    capacity_bytes: int,
    *,
    size_aware: bool = True,
    bandwidths: Bandwidths | None = None,
    progress: bool | None = None,
) -> SimResult:
    """Offline must-admit replay that knows the future: a reference line, not a bound.

    On a miss it evicts, until the model fits, the resident model whose next request is
    furthest away — weighted by its size when ``size_aware`` (evict the largest
    ``distance × size`` first: a big model needed late frees the most room for the longest).
    With equal sizes this is Belady's MIN, which is optimal. With mixed sizes the optimum is
    NP-hard and this rule is only a heuristic with perfect foresight, not a bound: online
    policies can beat it (notebook 02's trace has GDSF and LFU under the unweighted rule's
    object miss ratio), and the known bounds come from flow relaxations (FOO and PFOO, Berger,
    Beckmann and Harchol-Balter, 2018). Read it as a reference line.
    """
    if capacity_bytes <= 0:
        raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
    name = "Belady-size (offline)" if size_aware else "Belady (offline)"
    result = SimResult(name, bandwidths=bandwidths or Bandwidths())
    nxt = _next_uses(trace)
    next_use: dict[str, int] = {}  # resident model -> index of its next request
    sizes: dict[str, int] = {}
    heap: list[tuple[int, str]] = []  # (-next use, name), lazily invalidated; unweighted only
    used = 0
    for i, model in enumerate(_progress(trace, progress, name)):
        key, size = model.name, model.size
        result.bytes_requested += size
        if key in next_use:
            result.hits += 1
        else:
            if size > capacity_bytes:
                raise ValueError(f"{key!r} needs {size} B but the node holds {capacity_bytes} B")
            result.bytes_missed += size
            while used + size > capacity_bytes:
                if size_aware:
                    victim = max(next_use, key=lambda k: (next_use[k] - i) * sizes[k])
                else:
                    while True:
                        neg, victim = heapq.heappop(heap)
                        if next_use.get(victim) == -neg:
                            break
                del next_use[victim]
                used -= sizes.pop(victim)
                result.evictions += 1
            sizes[key] = size
            used += size
            result.peak_resident_bytes = max(result.peak_resident_bytes, used)
        next_use[key] = nxt[i]
        if not size_aware:
            heapq.heappush(heap, (-nxt[i], key))
    result.requests = len(trace)
    return result


# --------------------------------------------------------------------------- fleets

Router = Literal["random", "affinity"]


def _home(key: str, n_nodes: int) -> int:
    """A stable node for a model: where affinity routing sends it when nobody holds it."""
    return zlib.crc32(key.encode()) % n_nodes


def simulate_fleet(
    trace: Sequence[Model],
    nodes: Sequence[Node],
    *,
    router: Router,
    seed: int = 0,
    bandwidths: Bandwidths | None = None,
    progress: bool | None = None,
) -> SimResult:
    """Replay ``trace`` through ``nodes`` behind a router and measure the fleet as a whole.

    ``random`` sends each request to a uniformly chosen node (no affinity). ``affinity``
    prefers a node that already holds the model and otherwise sends it to the model's home
    node (a stable hash), so requests for one model keep meeting the same cache.
    """
    if not nodes:
        raise ValueError("a fleet needs at least one node")
    if router not in ("random", "affinity"):
        raise ValueError(f"router must be 'random' or 'affinity', got {router!r}")
    rng = random.Random(seed)
    n = len(nodes)
    label = f"{len(nodes)} nodes, {router} routing"
    result = SimResult(label, bandwidths=bandwidths or Bandwidths())
    homes: dict[str, int] = {}
    for model in _progress(trace, progress, label):
        key, size = model.name, model.size
        if router == "random":
            node = nodes[rng.randrange(n)]
        else:
            home = homes.get(key)
            if home is None:
                home = homes[key] = _home(key, n)
            node = nodes[home]
            if key not in node:
                node = next((other for other in nodes if key in other), node)
        result.bytes_requested += size
        if node.access(key, size):
            result.hits += 1
        else:
            result.bytes_missed += size
    result.requests = len(trace)
    result.evictions = sum(node.evictions for node in nodes)
    result.peak_resident_bytes = max(node.resident_bytes for node in nodes)
    return result


def fleet(
    n_nodes: int, capacity_bytes: int, policy: Callable[[], EvictionPolicy[str]]
) -> list[PolicyNode]:
    """``n_nodes`` fresh nodes of ``capacity_bytes`` each, one policy instance per node."""
    if n_nodes <= 0:
        raise ValueError(f"n_nodes must be positive, got {n_nodes}")
    return [PolicyNode(capacity_bytes, policy(), name=f"node{i}") for i in range(n_nodes)]


def replay_libcachesim(
    trace: Sequence[Model],
    capacity_bytes: int,
    algorithm: str,
    *,
    bandwidths: Bandwidths | None = None,
    **params: Any,
) -> SimResult:
    """Replay ``trace`` through libcachesim's ``algorithm`` (``"LRU"``, ``"Sieve"``, ``"GDSF"`` …).

    An independent implementation to compare against (PyPI ``libcachesim``, imported only
    here). Its ``get`` inserts on a miss and evicts until the object fits, like a must-admit
    node; two differences matter and are avoided by passing a fair trace: an object larger
    than the cache is never admitted (a node here raises instead), and a hit keeps the size
    the object was inserted with. The Belady variants are given each request's next use.
    """
    import libcachesim as lcs

    if capacity_bytes <= 0:
        raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
    too_big = {m.name for m in trace if m.size > capacity_bytes}
    if too_big:
        raise ValueError(f"models larger than the cache would be skipped by libcachesim: {too_big}")
    factory = getattr(lcs, algorithm, None)
    if factory is None:
        raise ValueError(f"libcachesim has no algorithm {algorithm!r}")
    cache = factory(cache_size=capacity_bytes, **params)
    ids: dict[str, int] = {}
    nxt = _next_uses(trace) if algorithm.startswith("Belady") else None
    never = 2**62
    result = SimResult(f"libcachesim {algorithm}", bandwidths=bandwidths or Bandwidths())
    request = lcs.Request()
    for i, model in enumerate(trace):
        request.obj_id = ids.setdefault(model.name, len(ids) + 1)
        request.obj_size = model.size
        if nxt is not None:
            request.next_access_vtime = nxt[i] if nxt[i] < len(trace) else never
        result.bytes_requested += model.size
        if cache.get(request):
            result.hits += 1
        else:
            result.bytes_missed += model.size
    result.requests = len(trace)
    return result


def drifting_zipf_trace(
    models: Sequence[Model],
    n_requests: int,
    *,
    alpha: float = 0.9,
    phases: object = 6,  # checked below; compiled, an int argument would take a bool
    seed: int = 0,
) -> list[Model]:
    """A Zipf(``alpha``) trace whose popularity ranking is reshuffled ``phases`` times.

    Each phase is a :func:`zipf_trace`-like stretch of about ``n_requests / phases`` requests
    with a fresh, seeded ranking, so the models that were hot in one phase are mostly cold in
    the next: the drift a platform sees as new models launch and old ones fade. A frequency
    policy without aging keeps the old favourites' counts and holds them long after they went
    cold; ``phases=1`` is a stationary trace.
    """
    if not models:
        raise ValueError("models must not be empty")
    if n_requests < 0:
        raise ValueError(f"n_requests must be >= 0, got {n_requests}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    if isinstance(phases, bool) or not isinstance(phases, int) or phases < 1:
        raise ValueError(f"phases must be a positive int, got {phases!r}")
    rng = random.Random(seed)
    ranked = list(models)
    cum_weights = list(accumulate(1.0 / (rank**alpha) for rank in range(1, len(ranked) + 1)))
    trace: list[Model] = []
    for phase in range(phases):
        rng.shuffle(ranked)
        length = n_requests * (phase + 1) // phases - len(trace)
        trace.extend(rng.choices(ranked, cum_weights=cum_weights, k=length))
    return trace
