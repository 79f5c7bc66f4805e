"""Device benchmarks of the serving node's memory system; writes one JSON file.

Every figure is set against a peer measured in the same run, so the ratios mean something on
any machine:

- ``copy``: device-to-device copy bandwidth, (bytes read + bytes written) / time: the
  ceiling a memory-bound kernel can approach;
- ``attention``: paged decode attention over a batch x context grid (up to >= 1 GiB of KV
  on a GPU) at KV block sizes 16, 64 and 128 (FlexAttention's decode tile clips to the
  block size), for every backend: ``flex`` (the fast path), ``gather`` (the oracle) and
  ``dense`` (SDPA on contiguous, unpaged KV: the peer). Achieved bandwidth = KV bytes read
  / time, and its fraction of copy bandwidth (target for the fast path: >= 0.7). A point
  within 2x of the backend's time for one sequence of one block is labelled
  ``launch_bound``: it measures launch overhead, not bandwidth;
- ``gather_overhead``: time the oracle spends copying blocks before SDPA starts;
- ``cow``: batched copy-on-write (all pairs, all layers, one indexed copy) against a loop
  of one copy per pair;
- ``host``: pinned and pageable host<->device bandwidth (swap's speed limit);
- ``recompute_vs_swap``: seconds per token to rebuild a preempted sequence's KV by prefill
  against swapping its blocks back in;
- ``decode_step``: host synchronisations per steady decode step (CUDA's sync debug mode),
  block-mask builds per step, and the SDPA kernel prefill runs on;
- ``e2e``: tokens/s of the engine (paged) against contiguous-cache generation (dense), in
  the run's dtype (bf16 on a GPU), with a token-for-token check of the greedy outputs
  that reports bf16 near-ties (``compare_greedy``) apart from real mismatches, and the
  number of kernels compiled in warm-up and after it (0 expected);
- ``store``: verified weight-store load rate as a fraction of a raw read of the same file.

GPU timings use CUDA events, warm-up runs and the median of repeated runs; the L2 cache
(50 MB on an H100/H200) is flushed before each timed attention run and working sets are
far larger than it. ``--smoke`` runs every section at tiny sizes on the CPU (a test runs
it), where timings use ``perf_counter`` and mean little.

Usage: ``python benchmarks/gpu.py --out benchmarks/gpu-results.json [--smoke] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from servelab.kv.attention import (  # noqa: E402
    Backend,
    DecodeBatch,
    FlexDecoder,
    dense_attention,
    flex_decoder,
    gather_attention,
    gather_kv,
    sdpa_backend,
)
from servelab.kv.engine import Engine, EngineConfig, Request  # noqa: E402
from servelab.kv.model import (  # noqa: E402
    BF16_TIE_RTOL,
    ModelConfig,
    TinyLlama,
    compare_greedy,
)
from servelab.kv.pool import KVPool, pinning_available  # noqa: E402
from servelab.weights.store import WeightStore  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20


class Timer:
    """Median wall time of a callable: CUDA events on a GPU, perf_counter elsewhere."""

    def __init__(self, device: torch.device, *, warmup: int, iters: int, flush_bytes: int):
        self.device = device
        self.warmup = warmup
        self.iters = iters
        self.cuda = device.type == "cuda"
        self._flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def __call__(self, fn: Callable[[], object], *, flush: bool = False) -> float:
        for _ in range(self.warmup):
            fn()
        self.sync()
        times = []
        for _ in range(self.iters):
            if flush:
                self._flush.zero_()  # evict the working set from L2
            if self.cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)


def plan(smoke: bool, device: torch.device) -> dict[str, Any]:
    """Sizes for a GPU run (seconds on an H200) or a CPU smoke run (tiny)."""
    if smoke:
        return {
            "dtype": torch.float32,
            "copy_bytes": 8 * MiB,
            "flush_bytes": MiB,
            "heads": (4, 2, 16),
            "block_size": 16,
            "block_sizes": [16, 64],
            "batches": [1, 3],
            "contexts": [40],
            "kv_cap": 64 * MiB,
            "cow_layers": 2,
            "cow_blocks": 64,
            "cow_pairs": 16,
            "host_bytes": 4 * MiB,
            "mid_model": ModelConfig(max_seq_len=256),
            "swap_tokens": 64,
            "e2e_requests": 6,
            "store_bytes": 4 * MiB,
            "warmup": 1,
            "iters": 3,
        }
    return {
        "dtype": torch.bfloat16,
        "copy_bytes": 2 * GiB,
        "flush_bytes": 256 * MiB,
        "heads": (32, 8, 128),
        "block_size": 16,
        "block_sizes": [16, 64, 128],
        "batches": [4, 32, 128],
        "contexts": [1024, 4096, 16384],
        "kv_cap": 2 * GiB,
        "cow_layers": 32,
        "cow_blocks": 1024,
        "cow_pairs": 256,
        "host_bytes": GiB,
        "mid_model": ModelConfig(
            vocab_size=32000,
            dim=2048,
            n_layers=8,
            n_heads=16,
            n_kv_heads=4,
            ffn_dim=5632,
            max_seq_len=4096,
        ),
        "swap_tokens": 2048,
        "e2e_requests": 32,
        "store_bytes": GiB,
        "warmup": 3,
        "iters": 10,
    }


# -- sections ------------------------------------------------------------------------------
def bench_copy(timer: Timer, p: dict[str, Any]) -> dict[str, Any]:
    src = torch.empty(p["copy_bytes"], dtype=torch.uint8, device=timer.device).random_()
    dst = torch.empty_like(src)
    t = timer(lambda: dst.copy_(src))
    return {"bytes": src.numel(), "seconds": t, "gbps": 2 * src.numel() / t / 1e9}


def bench_attention(timer: Timer, p: dict[str, Any], copy_gbps: float) -> dict[str, Any]:
    dev, dtype = timer.device, p["dtype"]
    hq, hkv, d = p["heads"]
    elt = torch.empty((), dtype=dtype).element_size()
    kv_per_token = 2 * hkv * d * elt  # one layer, K and V
    points = [
        (b, c) for b in p["batches"] for c in p["contexts"] if b * c * kv_per_token <= p["kv_cap"]
    ]
    compiled = dev.type == "cuda"
    rows: list[dict[str, Any]] = []
    floors: dict[str, dict[str, float]] = {}
    for bs in p["block_sizes"]:
        nb = max(-(-c // bs) * b for b, c in points) + 64
        gen = torch.Generator(device="cpu").manual_seed(0)  # block tables
        dgen = torch.Generator(device=dev).manual_seed(0)  # data, made where it lives
        k_cache = torch.randn((nb, bs, hkv, d), generator=dgen, device=dev, dtype=dtype)
        v_cache = torch.randn((nb, bs, hkv, d), generator=dgen, device=dev, dtype=dtype)
        decoder = flex_decoder(nb, bs, dev, compiled=compiled)

        caches = (k_cache, v_cache, gen, dgen, hq)

        def point(b: int, ctx: int) -> list[dict[str, Any]]:
            return _attention_point(timer, decoder, caches, b, ctx, copy_gbps)  # noqa: B023

        # the launch floor: one sequence of one block; a point within 2x of it measures
        # launch overhead, not bandwidth
        floor = {r["backend"]: r["ms"] for r in point(1, bs) if "gbps" in r}
        floors[str(bs)] = floor
        for b, ctx in points:
            for row in point(b, ctx):
                row["block_size"] = bs
                if row["backend"] in floor:
                    row["launch_bound"] = row["ms"] < 2 * floor[row["backend"]]
                rows.append(row)
        del k_cache, v_cache
    return {
        "heads": {"q": hq, "kv": hkv, "dim": d},
        "dtype": str(dtype),
        "block_sizes": p["block_sizes"],
        "flex_compiled": compiled,
        "launch_floor_ms": floors,
        "launch_bound_rule": "ms < 2 x the same backend's time for 1 sequence of 1 block",
        "rows": rows,
    }


def _attention_point(
    timer: Timer,
    decoder: FlexDecoder,
    caches: tuple[torch.Tensor, torch.Tensor, torch.Generator, torch.Generator, int],
    b: int,
    ctx: int,
    copy_gbps: float,
) -> list[dict[str, Any]]:
    """Every backend at one (batch, context) point, on identical data."""
    k_cache, v_cache, gen, dgen, hq = caches
    nb, bs, _, d = k_cache.shape
    order = torch.randperm(nb, generator=gen).tolist()  # scattered, like a busy pool
    per = -(-ctx // bs)
    tables = [order[i * per : (i + 1) * per] for i in range(b)]
    dev = k_cache.device
    batch = DecodeBatch.build(tables, [ctx] * b, block_size=bs, num_blocks=nb, device=dev)
    q = torch.randn((b, hq, d), generator=dgen, device=dev, dtype=k_cache.dtype)
    b, ctx = batch.batch, batch.max_len
    kv_bytes = b * ctx * 2 * k_cache[0, 0].numel() * k_cache.element_size()
    k_dense = gather_kv(k_cache, batch.tables, ctx).contiguous()
    v_dense = gather_kv(v_cache, batch.tables, ctx).contiguous()
    t0 = time.perf_counter()
    mask = decoder.prepare(batch)
    timer.sync()
    mask_s = time.perf_counter() - t0
    runs: dict[str, Callable[[], object]] = {
        "flex": lambda: decoder(q, k_cache, v_cache, batch, block_mask=mask),
        "gather": lambda: gather_attention(q, k_cache, v_cache, batch),
        "dense": lambda: dense_attention(q[:, :, None, :], k_dense, v_dense),
        "gather_only": lambda: (
            gather_kv(k_cache, batch.tables, ctx),
            gather_kv(v_cache, batch.tables, ctx),
        ),
    }
    ref = dense_attention(q[:, :, None, :], k_dense, v_dense)[:, :, 0, :]
    got = decoder(q, k_cache, v_cache, batch, block_mask=mask)
    err = float((ref.float() - got.float()).abs().max())
    times = {name: timer(fn, flush=True) for name, fn in runs.items()}
    rows: list[dict[str, Any]] = []
    for name in ("flex", "gather", "dense"):
        gbps = kv_bytes / times[name] / 1e9
        rows.append(
            {
                "backend": name,
                "batch": b,
                "context": ctx,
                "kv_bytes": kv_bytes,
                "ms": times[name] * 1e3,
                "gbps": gbps,
                "fraction_of_copy": gbps / copy_gbps,
            }
        )
    rows.append(
        {
            "backend": "gather_overhead",
            "batch": b,
            "context": ctx,
            "kv_bytes": kv_bytes,
            "ms": times["gather_only"] * 1e3,
            "share_of_oracle": times["gather_only"] / times["gather"],
            "oracle_over_flex": times["gather"] / times["flex"],
            "flex_max_abs_err_vs_dense": err,
            "block_mask_build_ms": mask_s * 1e3,
        }
    )
    return rows


def bench_cow(timer: Timer, p: dict[str, Any], copy_gbps: float) -> dict[str, Any]:
    _, hkv, d = p["heads"]
    pool = KVPool(
        p["cow_layers"],
        p["cow_blocks"],
        p["block_size"],
        hkv,
        d,
        dtype=p["dtype"],
        device=timer.device,
    )
    pool.kv.normal_()
    rng = random.Random(0)
    blocks = rng.sample(range(p["cow_blocks"]), 2 * p["cow_pairs"])
    pairs = list(zip(blocks[::2], blocks[1::2], strict=True))
    moved = len(pairs) * pool.bytes_per_block
    batched = timer(lambda: pool.copy_blocks(pairs))

    def loop() -> None:
        for s, dst in pairs:
            pool.kv[:, :, dst] = pool.kv[:, :, s]

    looped = timer(loop)
    gbps = 2 * moved / batched / 1e9
    return {
        "pairs": len(pairs),
        "layers": p["cow_layers"],
        "bytes": moved,
        "batched_ms": batched * 1e3,
        "loop_ms": looped * 1e3,
        "batched_gbps": gbps,
        "fraction_of_copy": gbps / copy_gbps,
        "loop_over_batched": looped / batched,
    }


def bench_host(timer: Timer, p: dict[str, Any]) -> dict[str, Any]:
    n = p["host_bytes"]
    dev_buf = torch.empty(n, dtype=torch.uint8, device=timer.device).random_()
    pin = pinning_available(timer.device)
    pinned = torch.empty(n, dtype=torch.uint8, pin_memory=pin)
    pageable = torch.empty(n, dtype=torch.uint8)
    out = {"bytes": n, "pinned": pin}
    out["h2d_gbps"] = n / timer(lambda: dev_buf.copy_(pinned, non_blocking=pin)) / 1e9
    out["d2h_gbps"] = n / timer(lambda: pinned.copy_(dev_buf, non_blocking=pin)) / 1e9
    out["pageable_h2d_gbps"] = n / timer(lambda: dev_buf.copy_(pageable)) / 1e9
    return out


def bench_recompute_vs_swap(timer: Timer, p: dict[str, Any], h2d_gbps: float) -> dict[str, Any]:
    cfg: ModelConfig = p["mid_model"]
    model = TinyLlama(cfg, device=timer.device, dtype=p["dtype"])
    n, bs = p["swap_tokens"], p["block_size"]
    blocks = list(range(-(-n // bs)))
    pool = model.new_pool(len(blocks) + 1, bs)
    tokens = [random.Random(1).randrange(cfg.vocab_size) for _ in range(n)]
    recompute = timer(lambda: model.prefill(pool, tokens, blocks))
    host = pool.swap_out(blocks)  # a pinned SwapSpace on CUDA
    swap_in = timer(lambda: pool.swap_in(host, blocks))
    swap_out = timer(lambda: pool.swap_out(blocks, host))  # into the same space: no new buffer
    params = sum(t.numel() for t in model.parameters())
    kv_token = cfg.kv_bytes_per_token(torch.empty((), dtype=p["dtype"]).element_size())
    return {
        "model_params": params,
        "tokens": n,
        "kv_bytes_per_token": kv_token,
        "recompute_us_per_token": recompute / n * 1e6,
        "swap_in_us_per_token": swap_in / n * 1e6,
        "swap_out_us_per_token": swap_out / n * 1e6,
        "recompute_over_swap_in": recompute / swap_in,
        "swap_in_bound_us_per_token": kv_token / (h2d_gbps * 1e9) * 1e6,
        "params_over_kv_bytes_per_token": params / kv_token,
    }


def bench_e2e(timer: Timer, p: dict[str, Any]) -> dict[str, Any]:
    from servelab.demo import default_requests

    model = TinyLlama(ModelConfig(max_seq_len=512), device=timer.device, dtype=p["dtype"])
    requests = [Request.of(r.prompt, r.max_new_tokens) for r in default_requests(p["e2e_requests"])]
    config = EngineConfig(num_blocks=96, block_size=16)
    graphs = _compiled_graphs()
    Engine(model, config).run(requests)  # warm-up: compiles every batch bucket once
    warm_graphs = _compiled_graphs()
    timer.sync()
    t0 = time.perf_counter()
    engine = Engine(model, config)
    paged = engine.run(requests)
    timer.sync()
    paged_s = time.perf_counter() - t0
    prompts = [list(r.prompt) for r in requests]
    width = max(r.max_new_tokens for r in requests)
    model.generate_dense(prompts, width)  # warm-up
    timer.sync()
    t0 = time.perf_counter()
    dense = model.generate_dense(prompts, width)
    timer.sync()
    dense_s = time.perf_counter() - t0
    generated = sum(r.max_new_tokens for r in requests)
    checks = [
        compare_greedy(model, r.prompt, c.samples[0], dense_row[: r.max_new_tokens])
        for c, r, dense_row in zip(paged, requests, dense, strict=True)
    ]
    return {
        "requests": len(requests),
        "dtype": str(p["dtype"]),
        "tokens": generated,
        "paged_tokens_per_s": generated / paged_s,
        "dense_tokens_per_s": generated / dense_s,
        "paged_over_dense": dense_s / paged_s,
        "tokens_equal": all(c.equal for c in checks),
        "near_ties": [
            {"request": i, "position": c.position, "gap": c.gap, "tolerance": c.tolerance}
            for i, c in enumerate(checks)
            if c.near_tie
        ],
        "mismatches": sum(not (c.equal or c.near_tie) for c in checks),
        "tie_rule": f"first differing logit gap <= {BF16_TIE_RTOL:.4f} x the largest logit",
        "compiled_graphs_warmup": warm_graphs - graphs,
        "compiled_graphs_timed_run": _compiled_graphs() - warm_graphs,
        "preemptions": engine.stats.preemptions,
        "prefix_cached_tokens": engine.stats.cached_tokens,
        "note": "dense decodes every row to the longest request; the paged engine stops each "
        "sequence at its own max_new_tokens",
    }


def _compiled_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def bench_decode_step(timer: Timer, p: dict[str, Any]) -> dict[str, Any]:
    """Per steady decode step of the demo model: host syncs (CUDA's sync debug mode; None
    on a CPU, where tests/test_decode_step.py counts them), block-mask builds, and the SDPA
    kernel prefill gets at the mid-size model's shapes."""
    model = TinyLlama(ModelConfig(max_seq_len=512), device=timer.device, dtype=p["dtype"])
    backend: Backend = "flex" if timer.cuda else "flex-eager"
    engine = Engine(model, EngineConfig(num_blocks=96, block_size=16, backend=backend))
    for i in range(8):
        engine.add(Request.of([1 + i, 2, 3, 4, 5], 64))
    for _ in range(4):  # prefill and warm decode steps
        engine.step()
    builds: list[int] = []
    original = FlexDecoder.prepare

    def counted(self: FlexDecoder, batch: DecodeBatch) -> object:
        builds.append(1)
        return original(self, batch)

    steps, syncs = 8, None
    FlexDecoder.prepare = counted  # type: ignore[method-assign]
    try:
        if timer.cuda:
            timer.sync()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    for _ in range(steps):
                        engine.step()
                finally:
                    torch.cuda.set_sync_debug_mode("default")
            syncs = sum("synchroniz" in str(w.message) for w in caught) / steps
        else:
            for _ in range(steps):
                engine.step()
    finally:
        FlexDecoder.prepare = original  # type: ignore[method-assign]
    cfg: ModelConfig = p["mid_model"]
    hd = cfg.dim // cfg.n_heads
    shape_q = (1, cfg.n_heads, 512, hd)
    shape_k = (1, cfg.n_kv_heads, 512, hd)
    q = torch.zeros(shape_q, device=timer.device, dtype=p["dtype"])
    k = torch.zeros(shape_k, device=timer.device, dtype=p["dtype"])
    return {
        "backend": backend,
        "syncs_per_step": syncs,
        "mask_builds_per_step": len(builds) / steps,
        "layers": model.config.n_layers,
        "prefill_backend_fresh_prompt": sdpa_backend(q, k, k),
        "prefill_backend_after_prefix_hit": sdpa_backend(q[:, :, 256:], k, k),
    }


def bench_store(timer: Timer, p: dict[str, Any]) -> dict[str, Any]:
    n = p["store_bytes"] // 4
    weights = {f"w{i}": torch.randn(n // 8) for i in range(8)}
    with tempfile.TemporaryDirectory() as tmp:
        store = WeightStore(tmp)
        size = store.save("bench", weights)
        store.read_raw("bench")  # warm the page cache for both readers
        raw = min(_wall(lambda: store.read_raw("bench")) for _ in range(3))
        load = min(_wall(lambda: store.load("bench")) for _ in range(3))
        to_dev = min(
            _wall(lambda: _sync_after(timer, store.load("bench", device=timer.device)))
            for _ in range(3)
        )
    return {
        "bytes": size,
        "raw_read_gbps": size / raw / 1e9,
        "verified_load_gbps": size / load / 1e9,
        "load_fraction_of_raw": raw / load,
        "load_to_device_gbps": size / to_dev / 1e9,
        "device_fraction_of_raw": raw / to_dev,
    }


def _wall(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _sync_after(timer: Timer, value: object) -> object:
    timer.sync()
    return value


SECTIONS = [
    "copy",
    "attention",
    "cow",
    "host",
    "recompute_vs_swap",
    "decode_step",
    "e2e",
    "store",
]


def run(smoke: bool, device: torch.device, sections: list[str]) -> dict[str, Any]:
    p = plan(smoke, device)
    timer = Timer(device, warmup=p["warmup"], iters=p["iters"], flush_bytes=p["flush_bytes"])
    started = time.perf_counter()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    result: dict[str, Any] = {
        "meta": {
            "device": str(device),
            "device_name": name or platform.machine(),
            "torch": torch.__version__,
            "smoke": smoke,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    }
    copy = bench_copy(timer, p)
    result["copy"] = copy
    host: dict[str, Any] | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # flex's eager-mode notice on CPU
        for section in sections:
            t0 = time.perf_counter()
            if section == "attention":
                result[section] = bench_attention(timer, p, copy["gbps"])
            elif section == "cow":
                result[section] = bench_cow(timer, p, copy["gbps"])
            elif section == "host":
                result[section] = host = bench_host(timer, p)
            elif section == "recompute_vs_swap":
                if host is None:
                    host = bench_host(timer, p)
                result[section] = bench_recompute_vs_swap(timer, p, host["h2d_gbps"])
            elif section == "decode_step":
                result[section] = bench_decode_step(timer, p)
            elif section == "e2e":
                result[section] = bench_e2e(timer, p)
            elif section == "store":
                result[section] = bench_store(timer, p)
            if section in result and isinstance(result[section], dict):
                result[section]["section_s"] = time.perf_counter() - t0
    result["meta"]["total_s"] = time.perf_counter() - started
    return result


def summary(r: dict[str, Any]) -> list[str]:
    lines = [
        f"{r['meta']['device_name']} ({r['meta']['device']}), torch {r['meta']['torch']}"
        f"{', smoke sizes' if r['meta']['smoke'] else ''}",
        f"copy: {r['copy']['gbps']:.1f} GB/s (read + write)",
    ]
    for row in r.get("attention", {}).get("rows", []):
        if row["backend"] == "gather_overhead":
            lines.append(
                f"  gather share of oracle {row['share_of_oracle']:.0%}, oracle/flex "
                f"{row['oracle_over_flex']:.2f}x"
            )
        else:
            lines.append(
                f"attention {row['backend']:>6} bs={row['block_size']:<3} B={row['batch']:<4} "
                f"ctx={row['context']:<6} {row['kv_bytes'] / MiB:8.1f} MiB {row['ms']:8.3f} ms "
                f"{row['gbps']:8.1f} GB/s  {row['fraction_of_copy']:.2f} of copy"
                f"{'  (launch-bound)' if row.get('launch_bound') else ''}"
            )
    if "cow" in r:
        c = r["cow"]
        lines.append(
            f"cow: {c['batched_gbps']:.1f} GB/s batched ({c['fraction_of_copy']:.2f} of "
            f"copy), loop {c['loop_over_batched']:.1f}x slower"
        )
    if "host" in r:
        h = r["host"]
        lines.append(
            f"host: h2d {h['h2d_gbps']:.1f} GB/s, d2h {h['d2h_gbps']:.1f} GB/s "
            f"(pinned={h['pinned']}), pageable h2d {h['pageable_h2d_gbps']:.1f} GB/s"
        )
    if "recompute_vs_swap" in r:
        s = r["recompute_vs_swap"]
        lines.append(
            f"recompute {s['recompute_us_per_token']:.2f} us/token vs swap-in "
            f"{s['swap_in_us_per_token']:.2f} us/token "
            f"(recompute/swap {s['recompute_over_swap_in']:.2f}x)"
        )
    if "decode_step" in r:
        s = r["decode_step"]
        lines.append(
            f"decode step ({s['backend']}, {s['layers']} layers): syncs/step "
            f"{s['syncs_per_step']}, mask builds/step {s['mask_builds_per_step']:.1f}; prefill "
            f"SDPA: {s['prefill_backend_fresh_prompt']} (fresh), "
            f"{s['prefill_backend_after_prefix_hit']} (after a prefix hit)"
        )
    if "e2e" in r:
        e = r["e2e"]
        lines.append(
            f"e2e ({e['dtype']}): paged {e['paged_tokens_per_s']:.0f} tok/s vs dense "
            f"{e['dense_tokens_per_s']:.0f} tok/s, tokens equal: {e['tokens_equal']}, "
            f"near-ties {len(e['near_ties'])}, mismatches {e['mismatches']}, compiled graphs "
            f"{e['compiled_graphs_warmup']} in warm-up, {e['compiled_graphs_timed_run']} after"
        )
    if "store" in r:
        s = r["store"]
        lines.append(
            f"store: verified load {s['load_fraction_of_raw']:.2f} of a raw read "
            f"({s['verified_load_gbps']:.2f} vs {s['raw_read_gbps']:.2f} GB/s)"
        )
    lines.append(f"total {r['meta']['total_s']:.1f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (runs on a CPU)")
    ap.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    ap.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    args = ap.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    sections = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        ap.error(f"unknown sections {unknown}; choose from {SECTIONS}")
    if device.type != "cuda" and not args.smoke:
        ap.error("full sizes need a GPU; use --smoke on a CPU")
    if device.type == "cpu":
        torch.set_num_threads(1)
    result = run(args.smoke, device, sections)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print("\n".join(summary(result)))
    return 0 if result.get("e2e", {}).get("mismatches", 0) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
