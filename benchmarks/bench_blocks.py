"""Block-manager throughput against real peers at 1k, 16k and 131k blocks, at equal occupancy.

The peers are the real packages, installed in their own environment by ``make bench-peers``
(``benchmarks/.peers-venv``, never the course's):

* **nano-vllm** ``nanovllm.engine.block_manager.BlockManager`` from the PyPI release
  ``nano-vllm-fork`` (xxhash64 block names, a ``deque`` free list, ``Block`` objects). Its
  package ``__init__`` imports the GPU engine (torch, transformers, tqdm), so the module is
  loaded without running it; the block manager itself needs only xxhash and numpy.
* **vLLM v1** ``vllm.v1.core.block_pool.BlockPool`` (``FreeKVCacheBlockQueue``, a doubly
  linked free list) with vLLM's own ``hash_block_tokens`` and hash functions, driven by a
  lean loop that does what ``KVCacheManager`` does for one full-attention group: look up the
  longest cached prefix (capped at ``len - 1`` tokens), ``touch`` the hits,
  ``get_new_blocks``, ``cache_full_blocks`` when blocks fill, ``free_blocks`` in reverse.
  Block 0 is vLLM's null block, so its pool gets one extra block. vLLM's ``Request`` and
  manager bookkeeping are left out: a floor on what vLLM spends, which favours the peer.
* **vLLM v1** ``vllm.v1.core.kv_cache_manager.KVCacheManager``, called as vLLM's scheduler
  calls it (``get_computed_blocks`` + ``allocate_slots`` on admission; per running request
  per step ``Request.append_output_token_ids``, which hashes a block as it fills, then
  ``allocate_slots(request, 1)``; ``free``): what vLLM really spends per call.

Two workloads, each replayed as continuous batching (``schedule``): every step admits new
requests, appends one decoded token to each running request (at most 256, vLLM's default
``max_num_seqs``) and frees the requests that finished. Ours takes a step in one
``append_slots`` call, as our scheduler does; the peers have no such call, so their step is
their own per-request calls, as their schedulers make them (ours one call per token is a
row too).

* ``system prompts`` (:func:`make_trace`): ``pool / 64`` shared system prompts of 4 blocks
  (Zipf popularity), each held live by an *anchor* sequence so hits land on blocks in use,
  which every peer caches; a request is a system prompt + a unique 1-31 token suffix, then
  8-40 decoded tokens. Mostly appends: a short prompt per ~24 decoded tokens.
* ``chat`` (:func:`make_chat`): multi-turn conversations; each turn's prompt is the whole
  conversation so far plus a new user message, sent the step after the previous turn ends,
  so its hit revives freed blocks. Longer prompts, most of them cached. nano-vllm-fork is
  left out here: its ``deallocate`` drops a freed block's hash, so it finds none of that
  history and its hits differ.

Occupancy is equal at every size: the pool is filled and evicting (every new block evicts
a cached one) before the clock starts. Both sides replay one seeded trace per pool size and
must report the same prefix hit, in tokens, at every admission (asserted). Every manager
gets the same warm-up (one short untimed replay), the same repetitions (best of
``--reps``, sizes and managers interleaved), the same GC policy (collected before, disabled
while timed) and the same clock: process CPU time, so time spent descheduled on a shared
machine does not count. Ours validates every input on every call; the peers validate
nothing. The peers hash every full block of every prompt (their hits are found by name);
ours hashes once per new prefix (hits are found by prefix identity), so each side runs with
a cryptographic hash (our SHA-256, vLLM's SHA-256, its default) and a fast one (Python's
``hash``; nano-vllm's and vLLM's xxhash): compare like with like.

Figures: operations (admissions, token appends, frees) per second, ours over each peer at
each size, and each manager's 131k / 1k. Run ``make bench-peers`` (or
``benchmarks/.peers-venv/bin/python benchmarks/bench_blocks.py``); without the peers'
environment only our rows print.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import importlib.util
import os
import platform
import random
import sys
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "src"))  # after PYTHONPATH: make bench-peers-compiled

from servelab.kv.prefix import PrefixCachingBlockManager  # noqa: E402
from servelab.native import describe  # noqa: E402

PEERS_PYTHON = HERE / ".peers-venv" / "bin" / "python"
SIZES = (1_024, 16_384, 131_072)
BLOCK = 16
SYSTEM_BLOCKS = 4


@dataclass(frozen=True)
class Request:
    prompt: list[int]
    decode: list[int]


@dataclass(frozen=True)
class Trace:
    pool: int
    anchors: list[list[int]]  # live for the whole run: one per system prompt
    requests: list[Request]
    warm: int  # the first ``warm`` requests fill the pool and its cache, untimed
    window: int  # live requests at a time


MAX_RUNNING = 256  # vLLM's default max_num_seqs: the decode batch of one step


def make_trace(
    pool: int, timed: int = 16_000, seed: int = 0, max_running: int | None = MAX_RUNNING
) -> Trace:
    """System prompts (Zipf popularity) + a unique 1-31 token suffix (never a whole block, so
    the ``len - 1`` cap never matters), then 8-40 decoded tokens."""
    rng = random.Random(seed)
    n_sys = max(4, pool // 64)
    systems = [[rng.randrange(32_000) for _ in range(SYSTEM_BLOCKS * BLOCK)] for _ in range(n_sys)]
    weights = [1 / (i + 1) for i in range(n_sys)]
    anchors = [[*s, rng.randrange(32_000)] for s in systems]
    warm = pool // 3  # each leaves ~3.5 cached blocks behind: the pool is full after these
    requests = []
    for _ in range(warm + timed):
        n = rng.choice([k for k in range(1, 2 * BLOCK) if k != BLOCK])
        suffix = [rng.randrange(32_000) for _ in range(n)]
        decode = [rng.randrange(32_000) for _ in range(rng.randint(8, 40))]
        (system,) = rng.choices(systems, weights)
        requests.append(Request(system + suffix, decode))
    window = max(4, int(pool * 0.45 / 3))  # a live request holds ~3 blocks of its own
    if max_running is not None:
        window = min(window, max_running)
    return Trace(pool, anchors, requests, warm, window)


@dataclass(frozen=True)
class Step:
    """One engine step: admit (prefill) new requests, one decode token for every running
    request admitted before this step, then free the requests that finished."""

    admit: list[int]  # request indices
    decode: list[int]
    tokens: list[int]
    finish: list[int]
    timed: bool


def schedule(trace: Trace) -> list[Step]:
    """Continuous batching over the trace: at most ``window`` requests run at once; a
    request admitted in a step decodes from the next one, a token per step, and is freed
    in the step that appends its last token. Anchors (indices ``0 .. len(anchors) - 1``) are
    admitted before the first step and never decode. The same for every manager."""
    first = len(trace.anchors)
    steps: list[Step] = []
    running: list[list[int]] = []  # [request index, tokens decoded so far]
    nxt = 0
    timed = False
    while nxt < len(trace.requests) or running:
        admit = []
        while len(running) + len(admit) < trace.window and nxt < len(trace.requests):
            timed = timed or nxt == trace.warm
            admit.append(first + nxt)
            nxt += 1
        decode, tokens, finish, still = [], [], [], []
        for entry in running:
            i, done = entry
            decode.append(i)
            tokens.append(trace.requests[i - first].decode[done])
            entry[1] = done + 1
            if entry[1] == len(trace.requests[i - first].decode):
                finish.append(i)
            else:
                still.append(entry)
        running = still + [[i, 0] for i in admit]
        steps.append(Step(admit, decode, tokens, finish, timed))
    return steps


def make_chat(
    pool: int, timed: int = 4_000, seed: int = 0, max_running: int = MAX_RUNNING
) -> tuple[Trace, list[Step]]:
    """Multi-turn conversations: each turn's prompt is the conversation so far (system
    prompt, earlier user messages and replies) plus a new 16-96 token user message; 2-6
    turns, 8-40 decoded tokens each. A turn is sent the step after the previous one ends
    (an agent's next call, or a quick reply), so its history is cached but no longer held:
    a hit revives freed blocks. A new conversation starts while the live ones reserve
    (for their longest turn) under 60% of the pool. Returns the trace with its schedule;
    the clock starts once the requests have taken twice the pool's blocks, so every pool
    is full and evicting."""
    rng = random.Random(seed)
    n_sys = max(4, pool // 64)
    systems = [[rng.randrange(32_000) for _ in range(SYSTEM_BLOCKS * BLOCK)] for _ in range(n_sys)]
    weights = [1 / (i + 1) for i in range(n_sys)]
    anchors = [[*s, rng.randrange(32_000)] for s in systems]
    first = len(anchors)
    requests: list[Request] = []
    steps: list[Step] = []
    running: list[list[Any]] = []  # [request index, decoded, reserved blocks, turns left]
    ready: list[tuple[list[int], int, int]] = []  # (history, turns left, reserved blocks)
    # A conversation reserves the blocks its longest turn can hold, so follow-ups always fit.
    reserved, taken, budget = 0, 0, int(pool * 0.6)
    warm: int | None = None

    def user() -> list[int]:
        return [rng.randrange(32_000) for _ in range(rng.randint(16, 96))]

    def admit(prompt: list[int], cached: int, left: int, size: int, admitted: list[int]) -> None:
        nonlocal taken
        decode = [rng.randrange(32_000) for _ in range(rng.randint(8, 40))]
        requests.append(Request(prompt, decode))
        taken += -(-len(prompt) // BLOCK) - cached
        admitted.append(first + len(requests) - 1)
        running.append([first + len(requests) - 1, 0, size, left])

    while True:
        limit = None if warm is None else warm + timed
        admitted: list[int] = []
        for history, left, size in ready:  # follow-ups first: their history is still cached
            if limit is not None and len(requests) >= limit:
                reserved -= size
                continue
            admit(history + user(), len(history) // BLOCK, left - 1, size, admitted)
        ready = []
        while (
            len(running) < max_running
            and reserved < budget
            and (limit is None or len(requests) < limit)
        ):
            (system,) = rng.choices(systems, weights)
            turns = rng.randint(2, 6)
            size = -(-(SYSTEM_BLOCKS * BLOCK + turns * (96 + 40)) // BLOCK) - SYSTEM_BLOCKS
            reserved += size
            admit(system + user(), SYSTEM_BLOCKS, turns - 1, size, admitted)
        decode, tokens, finish, still = [], [], [], []
        for entry in running:
            i, done, size, left = entry
            if i in admitted:
                still.append(entry)
                continue
            req = requests[i - first]
            decode.append(i)
            tokens.append(req.decode[done])
            entry[1] = done + 1
            if (len(req.prompt) + done) % BLOCK == 0:
                taken += 1
            if entry[1] == len(req.decode):
                finish.append(i)
                if left:
                    ready.append((req.prompt + req.decode, left, size))
                else:
                    reserved -= size
            else:
                still.append(entry)
        running = still
        steps.append(Step(admitted, decode, tokens, finish, warm is not None))
        if warm is None and taken >= 2 * pool:
            warm = len(requests)
        if not running and not ready and limit is not None and len(requests) >= limit:
            break
    trace = Trace(pool, anchors, requests, warm or 0, max_running)
    return trace, steps


# ------------------------------------------------------------------------------ drivers
class Ours:
    """Our manager through its public calls, every argument validated. ``batched``: one
    ``append_slots`` per step (what our scheduler calls); else ``append_slot`` per token."""

    def __init__(self, pool: int, hash_algo: Any, batched: bool = True) -> None:
        self.bm = PrefixCachingBlockManager(pool, BLOCK, hash_algo=hash_algo)
        self.batched = batched

    def prepare(self, trace: Trace, steps: list[Step]) -> list[Any]:
        return [step.decode for step in steps]  # our handles are the sequence ids

    def bind(self) -> tuple[Callable[..., int], Callable[..., Any], Callable[..., None]]:
        bm = self.bm
        if self.batched:
            return bm.allocate, bm.append_slots, bm.free_seq
        append_slot = bm.append_slot

        def step(seqs: list[int], tokens: list[int]) -> None:
            for seq, token in zip(seqs, tokens, strict=True):
                append_slot(seq, token)

        return bm.allocate, step, bm.free_seq


@functools.cache
def load_nanovllm() -> tuple[Any, Any]:
    """nanovllm.engine.{block_manager, sequence}, without the package ``__init__`` (which
    imports the GPU engine)."""
    spec = importlib.util.find_spec("nanovllm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nano-vllm-fork is not installed")
    root = next(iter(spec.submodule_search_locations))
    for name, path in (("nanovllm", root), ("nanovllm.engine", os.path.join(root, "engine"))):
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [path]
            sys.modules[name] = pkg
    bm = importlib.import_module("nanovllm.engine.block_manager")
    seq = importlib.import_module("nanovllm.engine.sequence")
    seq.Sequence.block_size = BLOCK
    return bm, seq


class NanoVllm:
    """nano-vllm's real BlockManager. Its handles are its own ``Sequence`` objects, built
    before the clock starts; a decode step is its scheduler's: ``append_token`` and
    ``may_append`` per running sequence (its ``can_append`` check is left out, which
    favours it)."""

    def __init__(self, pool: int) -> None:
        mod, self.seq_mod = load_nanovllm()
        self.bm = mod.BlockManager(pool, BLOCK)
        self.seqs: list[Any] = []

    def prepare(self, trace: Trace, steps: list[Step]) -> list[Any]:
        make = self.seq_mod.Sequence
        prompts = [*trace.anchors, *(r.prompt for r in trace.requests)]
        self.seqs = [make(p) for p in prompts]
        return [[self.seqs[i] for i in step.decode] for step in steps]

    def bind(self) -> tuple[Callable[..., int], Callable[..., Any], Callable[..., None]]:
        seqs = self.seqs
        allocate, may_append, deallocate = self.bm.allocate, self.bm.may_append, self.bm.deallocate

        def alloc(i: int, _tokens: list[int]) -> int:
            seq = seqs[i]
            allocate(seq)
            return int(seq.num_cached_tokens)

        def step(running: list[Any], tokens: list[int]) -> None:
            for seq, token in zip(running, tokens, strict=True):
                seq.append_token(token)
                may_append(seq)

        def free(i: int) -> None:
            deallocate(seqs[i])

        return alloc, step, free


class VllmBlockPool:
    """vLLM v1's BlockPool, driven as its KVCacheManager drives it. Its handles are
    request records built before the clock starts."""

    def __init__(self, pool: int, hash_name: str) -> None:
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core import kv_cache_utils
        from vllm.v1.core.block_pool import BlockPool

        self.hash_fn = get_hash_fn_by_name(hash_name)
        kv_cache_utils.init_none_hash(self.hash_fn)
        self.hash_block_tokens = kv_cache_utils.hash_block_tokens
        self.pool = BlockPool(pool + 1, enable_caching=True, hash_block_size=BLOCK)
        self.reqs: list[Any] = []

    def prepare(self, trace: Trace, steps: list[Step]) -> list[Any]:
        n = len(trace.anchors) + len(trace.requests)
        self.reqs = [types.SimpleNamespace() for _ in range(n)]
        return [[self.reqs[i] for i in step.decode] for step in steps]

    def bind(self) -> tuple[Callable[..., int], Callable[..., Any], Callable[..., None]]:
        pool, hash_fn, hash_block = self.pool, self.hash_fn, self.hash_block_tokens
        get_cached, group = pool.get_cached_block, [0]
        get_new_blocks, cache_full_blocks = pool.get_new_blocks, pool.cache_full_blocks
        reqs = self.reqs
        size = BLOCK

        def alloc(i: int, tokens: list[int]) -> int:
            req = reqs[i]
            req.tokens, req.block_hashes = list(tokens), []
            parent = None
            for start in range(0, len(tokens) - size + 1, size):  # the Request's block hasher
                parent = hash_block(hash_fn, parent, tokens[start : start + size])
                req.block_hashes.append(parent)
            hits = []
            for h in req.block_hashes[: (len(tokens) - 1) // size]:
                cached = get_cached(h, group)
                if cached is None:
                    break
                hits.append(cached[0])
            need = -(-len(tokens) // size) - len(hits)
            evictable_hits = sum(1 for b in hits if b.ref_cnt == 0)
            if need > pool.get_num_free_blocks() - evictable_hits:
                raise MemoryError("vLLM peer: out of blocks")
            pool.touch(hits)
            req.blocks = hits + get_new_blocks(need)
            full = len(tokens) // size
            cache_full_blocks(req, req.blocks, len(hits), full, size, 0)
            req.num_cached = full
            return len(hits) * size

        def step(running: list[Any], tokens: list[int]) -> None:
            for req, token in zip(running, tokens, strict=True):
                req_tokens = req.tokens
                req_tokens.append(token)
                n = len(req_tokens)
                if n % size == 1:
                    req.blocks.extend(get_new_blocks(1))
                elif n % size == 0:
                    hashes = req.block_hashes
                    parent = hashes[-1] if hashes else None
                    hashes.append(hash_block(hash_fn, parent, req_tokens[n - size :]))
                    cache_full_blocks(req, req.blocks, req.num_cached, n // size, size, 0)
                    req.num_cached = n // size

        def free(i: int) -> None:
            pool.free_blocks(reversed(reqs[i].blocks))

        return alloc, step, free


class VllmKVCacheManager:
    """vLLM v1's KVCacheManager, called as its scheduler calls it: ``get_computed_blocks``
    and ``allocate_slots`` on admission, ``append_output_token_ids`` (which hashes a block
    as it fills) then ``allocate_slots(request, 1)`` per running request per step, ``free``
    at the end. Its ``Request`` objects are built before the clock starts, without their
    block hasher; the hasher is attached at admission, so the prompt's hashing is timed."""

    def __init__(self, pool: int, hash_name: str) -> None:
        import torch
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core import kv_cache_utils
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.request import Request

        hash_fn = get_hash_fn_by_name(hash_name)
        kv_cache_utils.init_none_hash(hash_fn)
        self.hasher = kv_cache_utils.get_request_block_hasher(BLOCK, hash_fn)
        spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float16)
        config = KVCacheConfig(
            num_blocks=pool + 1,  # block 0 is vLLM's null block
            kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
        )
        self.manager = KVCacheManager(
            config,
            max_model_len=1 << 20,
            scheduler_block_size=BLOCK,
            hash_block_size=BLOCK,
            enable_caching=True,
        )
        self.make_request, self.params = Request, SamplingParams(max_tokens=1 << 16)
        self.reqs: list[Any] = []

    def prepare(self, trace: Trace, steps: list[Step]) -> list[Any]:
        prompts = [*trace.anchors, *(r.prompt for r in trace.requests)]
        make, params = self.make_request, self.params
        self.reqs = [make(str(i), p, params, None) for i, p in enumerate(prompts)]
        return [[self.reqs[i] for i in step.decode] for step in steps]

    def bind(self) -> tuple[Callable[..., int], Callable[..., Any], Callable[..., None]]:
        manager, reqs, hasher = self.manager, self.reqs, self.hasher
        get_computed, allocate_slots, free_request = (
            manager.get_computed_blocks,
            manager.allocate_slots,
            manager.free,
        )

        def alloc(i: int, _tokens: list[int]) -> int:
            req = reqs[i]
            req._block_hasher = hasher
            req.update_block_hashes()
            blocks, hit, _ = get_computed(req)
            if allocate_slots(req, req.num_tokens - hit, hit, blocks) is None:
                raise MemoryError("vLLM peer: out of blocks")
            req.num_computed_tokens = req.num_tokens
            return int(hit)

        def step(running: list[Any], tokens: list[int]) -> None:
            for req, token in zip(running, tokens, strict=True):
                req.append_output_token_ids(token)
                if allocate_slots(req, 1) is None:
                    raise MemoryError("vLLM peer: out of blocks")
                req.num_computed_tokens += 1

        def free(i: int) -> None:
            free_request(reqs[i])

        return alloc, step, free


# ------------------------------------------------------------------------------- replay
def replay(
    driver: Any, trace: Trace, steps: list[Step], handles: list[Any]
) -> tuple[int, float, list[int]]:
    """Run the schedule on a prepared driver; returns (timed operations, their CPU seconds,
    hit tokens per admission). The clock starts at the first timed step, with the GC off."""
    alloc, decode, free = driver.bind()
    prompts = [*trace.anchors, *(r.prompt for r in trace.requests)]
    for i, prompt in enumerate(trace.anchors):
        alloc(i, prompt)
    hits = []
    ops = 0
    start = 0.0
    clock_on = False
    for step, running in zip(steps, handles, strict=True):
        if step.timed and not clock_on:
            gc.collect()
            gc.disable()
            ops, start, clock_on = 0, time.process_time(), True
        for i in step.admit:
            hits.append(alloc(i, prompts[i]))
        if running:
            decode(running, step.tokens)
        for i in step.finish:
            free(i)
        ops += len(step.admit) + len(step.tokens) + len(step.finish)
    elapsed = time.process_time() - start
    gc.enable()
    return ops, elapsed, hits


def timed(make: Callable[[], Any], trace: Trace, steps: list[Step]) -> tuple[float, list[int]]:
    driver = make()
    handles = driver.prepare(trace, steps)
    try:
        ops, elapsed, hits = replay(driver, trace, steps, handles)
    finally:
        gc.enable()
    return ops / elapsed, hits


def managers(with_peers: bool) -> dict[str, Callable[[int], Any]]:
    rows: dict[str, Callable[[int], Any]] = {
        "ours: sha256, append_slots per step": lambda n: Ours(n, "sha256"),
        "ours: builtin, append_slots per step": lambda n: Ours(n, "builtin"),
        "ours: sha256, append_slot per token": lambda n: Ours(n, "sha256", batched=False),
    }
    if with_peers:
        rows["peer: nano-vllm BlockManager (xxh64)"] = NanoVllm
        rows["peer: vLLM v1 BlockPool (sha256)"] = lambda n: VllmBlockPool(n, "sha256")
        rows["peer: vLLM v1 BlockPool (xxhash)"] = lambda n: VllmBlockPool(n, "xxhash")
        rows["peer: vLLM v1 KVCacheManager (sha256)"] = lambda n: VllmKVCacheManager(n, "sha256")
    return rows


def peers_available() -> str | None:
    """None if the peers import here, else why not."""
    try:
        load_nanovllm()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import vllm.v1.core.block_pool  # noqa: F401
    except Exception as exc:  # any import failure means: no peers in this interpreter
        return f"{type(exc).__name__}: {exc}"
    return None


WORKLOADS = {
    "system prompts": "make_trace: shared system prompts + a short unique suffix",
    "chat": "make_chat: multi-turn conversations, each turn hits its history",
}


def workload(name: str, pool: int, timed: int, seed: int) -> tuple[Trace, list[Step]]:
    if name == "chat":
        return make_chat(pool, max(timed // 4, 250), seed)
    trace = make_trace(pool, timed, seed)
    return trace, schedule(trace)


def left_out(workload_name: str, manager: str) -> str | None:
    """Why a manager is not measured on a workload, or None."""
    if workload_name == "chat" and "nano-vllm" in manager:
        return (
            "nano-vllm (nano-vllm-fork 20260210) drops a block's hash when the block is "
            "freed, so it finds no history that is not held: its hits differ"
        )
    return None


def measure(
    name: str, rows: dict[str, Callable[[int], Any]], sizes: tuple[int, ...], reps: int, n: int
) -> None:
    """One workload: every manager at every size, best of ``reps``, hits checked equal."""
    rows = {m: make for m, make in rows.items() if left_out(name, m) is None}
    runs = {size: workload(name, size, n, seed=0) for size in sizes}
    short = workload(name, 1_024, 1_000, seed=1)
    for make in rows.values():  # warm-up: one short untimed replay per manager
        timed(lambda make=make: make(1_024), *short)
    best: dict[str, dict[int, float]] = {m: {} for m in rows}
    reference: list[int] | None = None
    for _ in range(reps):
        for size in sizes:
            reference = None
            for manager, make in rows.items():
                rate, hits = timed(lambda make=make, size=size: make(size), *runs[size])
                if reference is None:
                    reference = hits
                elif hits != reference:
                    bad = next(
                        k for k, (a, b) in enumerate(zip(hits, reference, strict=True)) if a != b
                    )
                    raise SystemExit(
                        f"{manager} at {size} blocks: admission {bad} hit {hits[bad]} tokens, "
                        f"ours {reference[bad]}: the managers do not agree on the trace"
                    )
                best[manager][size] = max(best[manager].get(size, 0.0), rate)
    trace = runs[sizes[-1]][0]
    timed_requests = len(trace.requests) - trace.warm
    prompt = sum(len(r.prompt) for r in trace.requests) / len(trace.requests)
    print(
        f"\n== {name} ({WORKLOADS[name]}): {timed_requests:,} timed requests, mean prompt "
        f"{prompt:.0f} tokens; hits agree at every admission "
        f"({sum(reference or []):,} hit tokens at {sizes[-1]:,} blocks)"
    )
    header = f"{'ops/s':40}" + "".join(f"{n:>12,}" for n in sizes) + f"{'last/first':>12}"
    print(header + "\n" + "-" * len(header))
    for manager, rates in best.items():
        cells = "".join(f"{rates[n] / 1e3:>10.0f}k/s" for n in sizes)
        print(f"{manager:40}{cells}{rates[sizes[-1]] / rates[sizes[0]]:>12.2f}")
    ours = [m for m in rows if m.startswith("ours")]
    peers = [m for m in rows if m.startswith("peer")]
    if peers:
        print("\nours / peer (>= 1.5 is the target)")
        for mine in ours:
            for peer in peers:
                ratios = " ".join(f"{best[mine][n] / best[peer][n]:>6.2f}" for n in sizes)
                print(f"  {mine[6:]:36} / {peer[6:]:32} {ratios}")
    for manager in managers(with_peers=bool(peers)):
        why = left_out(name, manager)
        if why:
            print(f"  not measured: {manager[6:]}: {why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small pool, one run (smoke)")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per cell (best kept)")
    parser.add_argument("--no-peers", action="store_true", help="only our managers")
    parser.add_argument(
        "--workload", choices=[*WORKLOADS, "all"], default="all", help="which trace to replay"
    )
    args = parser.parse_args()
    why_not = "--no-peers" if args.no_peers else peers_available()
    if (
        why_not
        and not args.no_peers
        and PEERS_PYTHON.exists()
        and sys.executable != str(PEERS_PYTHON)
    ):
        os.execv(str(PEERS_PYTHON), [str(PEERS_PYTHON), __file__, *sys.argv[1:]])
    sizes, reps, n_timed = ((1_024,), 1, 1_000) if args.quick else (SIZES, args.reps, 16_000)
    rows = managers(with_peers=why_not is None)
    print(
        f"block size {BLOCK}; decode batches of at most {MAX_RUNNING}; per pool: pool/64 "
        f"system prompts held live, the pool filled and evicting before the clock starts; "
        f"best of {reps}, CPU time, GC off while timed; "
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}; "
        f"servelab {describe()}"
    )
    if why_not:
        print(f"peers not measured ({why_not}); run `make bench-peers`")
    for name in WORKLOADS if args.workload == "all" else [args.workload]:
        measure(name, rows, sizes, reps, n_timed)


if __name__ == "__main__":
    main()
