"""Time to first token of a long shared prefix: loaded from the KV offload tiers vs recomputed.

Two parts, both printing ratios against a peer measured in the same run:

1. **Measured on this machine's CPU**: the reference engine serves a prompt with a long prefix,
   unrelated prompts push that prefix out of a small GPU pool (here a CPU pool), then the prefix
   comes back with a new suffix. Its time to first token (one request, one generated token) is
   measured with the prefix recomputed (no tiers), loaded from the CPU tier and loaded from the
   disk tier (a temporary directory), write-back and write-through. Median of repeats.
2. **Simulated with stated bandwidths** (:mod:`servelab.kv.offload.cost`): a Llama-3-8B-shaped
   model at 400 TFLOP/s of prefill, host memory over PCIe at 50 GB/s, one NVMe drive at 7 GB/s;
   beside it, notebook 04's per-token recompute-vs-swap arithmetic at the same length.

Run: ``python benchmarks/bench_offload.py [--quick]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

import torch

from servelab.kv.engine import Engine, EngineConfig, Request
from servelab.kv.model import ModelConfig, TinyLlama
from servelab.kv.offload.cost import (
    HOST_LINK,
    LLAMA_8B,
    NVME_LINK,
    PREFILL_FLOPS,
    simulate_load,
    simulate_prefill,
    ttft,
)


def measured(prefix_len: int, repeats: int) -> None:
    torch.set_num_threads(1)
    cfg = ModelConfig(dim=256, n_layers=4, n_heads=8, n_kv_heads=2, ffn_dim=1024, max_seq_len=4096)
    model = TinyLlama(cfg)
    block = 16
    bytes_per_block = model.new_pool(1, block).bytes_per_block
    rng = random.Random(0)
    prefix = [rng.randrange(cfg.vocab_size) for _ in range(prefix_len)]
    fillers = [[rng.randrange(cfg.vocab_size) for _ in range(prefix_len)] for _ in range(2)]
    pool_blocks = prefix_len // block + 8  # holds one long prompt: the fillers evict the prefix
    print(
        f"\nmeasured on this CPU (1 thread): model dim {cfg.dim}, {cfg.n_layers} layers, "
        f"{cfg.n_kv_heads} KV heads; prefix {prefix_len} tokens = {prefix_len // block} blocks "
        f"of {bytes_per_block:,} B; GPU pool {pool_blocks} blocks; median of {repeats}"
    )
    setups: dict[str, dict[str, object]] = {"recompute (no tiers)": {}}
    cpu_bytes = 4 * prefix_len // block * bytes_per_block
    setups["CPU tier, write-back"] = {"offload_cpu_bytes": cpu_bytes}
    setups["CPU tier, write-through"] = {
        "offload_cpu_bytes": cpu_bytes,
        "offload_write_through": True,
    }
    setups["disk tier (CPU tier of 2 blocks)"] = {
        "offload_cpu_bytes": 2 * bytes_per_block,
        "offload_disk_bytes": 4 * cpu_bytes,
    }
    results: dict[str, float] = {}
    for name, extra in setups.items():
        times, loaded, stored = [], 0, 0
        for r in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                kw = dict(extra)
                if "offload_disk_bytes" in kw:
                    kw["offload_disk_dir"] = tmp
                engine = Engine(
                    model,
                    EngineConfig(num_blocks=pool_blocks, block_size=block, **kw),  # type: ignore[arg-type]
                )
                engine.run([Request.of([*prefix, 1, 2, 3], 1)])
                engine.run([Request.of(f, 1) for f in fillers])  # the prefix leaves the pool
                t0 = time.perf_counter()
                engine.run([Request.of([*prefix, 4, 5, r], 1)])
                times.append(time.perf_counter() - t0)
                if engine.offload is not None:
                    loaded = engine.offload.stats.loaded_blocks
                    stored = engine.offload.stats.stored
        results[name] = statistics.median(times)
        note = f"{loaded} blocks loaded, {stored} stored" if extra else "prefix recomputed"
        print(f"  {name:<34} TTFT {results[name] * 1e3:8.2f} ms   ({note})")
    base = results["recompute (no tiers)"]
    for name, t in results.items():
        if name != "recompute (no tiers)":
            print(f"  ratio recompute / {name:<24} {base / t:6.2f}x")


def simulated() -> None:
    m = LLAMA_8B
    print(
        f"\nsimulated: {m.params / 1e9:.0f}B params, {m.layers} layers, d_model {m.d_model}, "
        f"{m.kv_heads} KV heads x {m.head_dim}, bf16 -> {m.kv_bytes_per_token:,} KV B/token; "
        f"prefill {PREFILL_FLOPS / 1e12:.0f} TFLOP/s; host {HOST_LINK.bandwidth / 1e9:.0f} GB/s "
        f"+ {HOST_LINK.latency_s * 1e6:.0f} us/chunk; NVMe {NVME_LINK.bandwidth / 1e9:.0f} GB/s "
        f"+ {NVME_LINK.latency_s * 1e6:.0f} us/chunk; chunks of 256 tokens; prompt = prefix + 64"
    )
    print(
        f"  {'prefix':>7} {'TTFT recompute':>15} {'from CPU':>10} {'from disk':>10} "
        f"{'CPU x':>6} {'disk x':>7} | notebook 04 per token: {'recompute':>10} {'swap-in':>8}"
    )
    for n in (1_024, 8_192, 32_768):
        rec = ttft(m, n + 64, 0, None)
        cpu = ttft(m, n + 64, n, HOST_LINK)
        disk = ttft(m, n + 64, n, NVME_LINK)
        per_token = (2 * m.params + 2 * m.layers * m.d_model * n) / PREFILL_FLOPS
        swap = m.kv_bytes_per_token / HOST_LINK.bandwidth
        print(
            f"  {n:>7,} {rec * 1e3:>12.1f} ms {cpu * 1e3:>7.1f} ms {disk * 1e3:>7.1f} ms "
            f"{rec / cpu:>6.1f} {rec / disk:>7.1f} | {per_token * 1e6:>20.1f} us "
            f"{swap * 1e6:>6.2f} us"
        )
    n = 8_192
    load = simulate_load(m, n, NVME_LINK)
    print(
        f"  e.g. {n:,} tokens: load from disk {load * 1e3:.0f} ms vs recompute "
        f"{simulate_prefill(m, 0, n, PREFILL_FLOPS) * 1e3:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter prefix, fewer repeats")
    args = parser.parse_args()
    measured(256 if args.quick else 2048, 3 if args.quick else 5)
    simulated()


if __name__ == "__main__":
    main()
