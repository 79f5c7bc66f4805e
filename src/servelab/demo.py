"""``servelab demo``: serve a batch of requests with the tiny model through the paged KV cache.

Runs on CUDA when present and on the CPU otherwise. The default batch is built to exercise
every mechanism at once: all prompts share a system prompt (prefix-cache hits), a quarter
of the requests ask for several samples (fork and copy-on-write), and the pool is sized so
that the scheduler has to preempt. The summary reports throughput, blocks, preemptions,
prefix hits and the KV slots a contiguous reservation would have wasted, then checks the
greedy outputs against dense generation token for token.
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.kv.engine import Request

__all__ = ["default_requests", "main"]


def default_requests(
    count: int = 32, *, seed: int = 0, system_len: int = 32, vocab: int = 256
) -> list[Request]:
    """The demo's batch: a shared system prompt, varied questions and answer lengths."""
    from servelab.kv.engine import Request

    rng = random.Random(seed)
    system = [rng.randrange(vocab) for _ in range(system_len)]
    out: list[Request] = []
    for i in range(count):
        question = [rng.randrange(vocab) for _ in range(rng.randrange(4, 41))]
        max_new = rng.randrange(16, 65)
        if i % 4 == 3:
            out.append(Request.of(system + question, max_new, n=3, temperature=0.8, seed=i))
        else:
            out.append(Request.of(system + question, max_new))
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servelab demo", description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=32, help="number of requests (default 32)")
    p.add_argument("--num-blocks", type=int, default=48, help="KV pool size in blocks")
    p.add_argument("--block-size", type=int, default=16, help="tokens per block (default 16)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    p.add_argument("--preemption", choices=["recompute", "swap"], default="recompute")
    p.add_argument("--no-prefix-cache", action="store_true", help="disable prefix caching")
    p.add_argument("--seed", type=int, default=0, help="seed of the request batch")
    p.add_argument("--no-check", action="store_true", help="skip the dense equality check")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``servelab demo``; returns a process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:  # `servelab demo -- --quiet` passes the separator through
        argv = argv[1:]
    args = _parser().parse_args(argv)
    if args.requests < 1 or args.num_blocks < 2 or args.block_size < 1:
        print("error: --requests, --num-blocks and --block-size must be positive", file=sys.stderr)
        return 2
    try:
        import torch
        from tqdm import tqdm
    except ImportError as err:  # the course half works without torch; the demo does not
        print(
            f"error: the demo needs the engine extras ({err.name}): pip install 'servelab[engine]'",
            file=sys.stderr,
        )
        return 2

    from servelab.kv.engine import Engine, EngineConfig
    from servelab.kv.model import ModelConfig, TinyLlama

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu":
        torch.set_num_threads(1)  # a 64-wide model: threads cost more than they give
    requests = default_requests(args.requests, seed=args.seed)
    model = TinyLlama(ModelConfig(max_seq_len=512), device=device)
    config = EngineConfig(
        num_blocks=args.num_blocks,
        block_size=args.block_size,
        prefix_caching=not args.no_prefix_cache,
        preemption=args.preemption,
        num_host_blocks=4 * args.num_blocks if args.preemption == "swap" else 0,
    )
    try:
        engine = Engine(model, config)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    n_params = sum(p.numel() for p in model.parameters())
    fans = sum(1 for r in requests if r.n > 1)
    backend = config.backend or ("flex" if device.type == "cuda" else "gather")
    print(
        f"servelab demo: tiny Llama ({n_params / 1e6:.2f} M parameters) on {device}, fp32, "
        f"paged attention backend '{backend}'"
    )
    print(
        f"{len(requests)} requests ({fans} with parallel samples), pool of "
        f"{config.num_blocks} blocks x {config.block_size} tokens"
    )
    total = sum(r.max_new_tokens * r.n for r in requests)
    try:
        with tqdm(total=total, unit="tok", disable=args.quiet, file=sys.stderr) as bar:
            done = engine.run(requests, progress=bar.update)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    st = engine.stats
    cached = f"{st.cached_tokens} of {st.prompt_tokens} prompt tokens"
    share = st.cached_tokens / st.prompt_tokens if st.prompt_tokens else 0.0
    rows = [
        (
            "tokens/s",
            f"{st.tokens_per_s:,.0f}  ({st.generated_tokens} tokens in "
            f"{st.wall_s:.2f} s, {st.steps} steps)",
        ),
        ("blocks used", f"{st.peak_blocks_used} of {config.num_blocks} at peak"),
        ("preemptions", f"{st.preemptions} ({config.preemption})"),
        ("prefix hits", f"{cached} came from the cache ({share:.0%})"),
        (
            "forks / COW",
            f"{st.forks} forks, {st.cow_copies} copy-on-write block copies; "
            f"{st.sharing_saving:.0%} of table entries shared",
        ),
        (
            "KV waste",
            f"paged {st.paged_waste:.1%} of reserved slots; a contiguous "
            f"reservation wastes {st.contiguous_waste:.1%} (prompt + max_new) or "
            f"{st.max_seq_len_waste:.1%} (max_len {model.config.max_seq_len})",
        ),
    ]
    if not args.no_check:
        greedy = [(r, c) for r, c in zip(requests, done, strict=True) if r.temperature == 0]
        same = sum(
            c.samples[0] == model.generate_dense([list(r.prompt)], r.max_new_tokens)[0]
            for r, c in greedy
        )
        rows.append(("check", f"{same}/{len(greedy)} greedy outputs equal dense generation"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    if not args.no_check and same != len(greedy):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
