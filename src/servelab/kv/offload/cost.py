"""When loading KV from a tier beats recomputing it: a simulator with stated bandwidths.

A prompt whose first ``n`` tokens' KV sits in a tier can start decoding after either

* **recompute**: a prefill over those ``n`` tokens, about ``2 · params`` FLOPs per token plus
  attention over every earlier position (``4 · layers · d_model · i`` FLOPs at position ``i``),
  at the accelerator's effective prefill FLOP/s; or
* **load**: one request per chunk to the tier (its latency) and ``n · KV bytes per token``
  over the tier's link (its bandwidth), with KV bytes per token ``2 (K and V) · layers ·
  kv_heads · head_dim · bytes per value``.

The suffix after the prefix is computed either way, so the choice is between those two
costs. :func:`simulate_load` and :func:`simulate_prefill` add the costs up chunk by chunk and
token by token (what a closed form must agree with); :func:`recompute_seconds` and
:func:`load_seconds` are the closed forms notebook 06 asks for.

The stated figures: :data:`PREFILL_FLOPS` and the host link's 50 GB/s are notebook 04's
(effective FLOP/s of a prefill on one accelerator; pinned host memory over PCIe Gen5 x16 in
practice); the disk link is one NVMe drive at 7 GB/s of large sequential reads (a Gen4 x4
drive's rated figure), with 100 µs per chunk request, against 10 µs for a host copy. They are
assumptions of the model, not measurements of this machine.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "HOST_LINK",
    "LLAMA_8B",
    "NVME_LINK",
    "PREFILL_FLOPS",
    "Link",
    "ModelShape",
    "load_seconds",
    "recompute_seconds",
    "simulate_load",
    "simulate_prefill",
    "ttft",
]


@dataclass(frozen=True)
class ModelShape:
    """What the cost of a token depends on: parameters, layers, width and the KV geometry."""

    params: float
    layers: int
    d_model: int
    kv_heads: int
    head_dim: int
    bytes_per_value: int = 2

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value


@dataclass(frozen=True)
class Link:
    """A tier's path to the accelerator: bytes per second, and seconds per chunk request."""

    name: str
    bandwidth: float
    latency_s: float


LLAMA_8B = ModelShape(params=8.0e9, layers=32, d_model=4096, kv_heads=8, head_dim=128)
PREFILL_FLOPS = 400e12  # effective FLOP/s of a prefill on one accelerator (notebook 04)
HOST_LINK = Link("cpu", 50e9, 10e-6)  # pinned host memory over PCIe Gen5 x16, in practice
NVME_LINK = Link("disk", 7e9, 100e-6)  # one NVMe drive, large sequential reads


def simulate_load(model: ModelShape, tokens: int, link: Link, chunk_tokens: int = 256) -> float:
    """Seconds to bring ``tokens`` tokens of KV over ``link``, one chunk request at a time."""
    seconds = 0.0
    for start in range(0, tokens, chunk_tokens):
        n = min(chunk_tokens, tokens - start)
        seconds += link.latency_s + n * model.kv_bytes_per_token / link.bandwidth
    return seconds


def simulate_prefill(model: ModelShape, start: int, end: int, flops: float) -> float:
    """Seconds to compute positions ``start..end-1`` given the KV of the ones before."""
    total = 0.0
    for i in range(start, end):
        total += 2 * model.params + 4 * model.layers * model.d_model * i
    return total / flops


def ttft(
    model: ModelShape,
    prompt_tokens: int,
    loaded_tokens: int,
    link: Link | None,
    flops: float = PREFILL_FLOPS,
    chunk_tokens: int = 256,
) -> float:
    """Time to first token of a prompt whose first ``loaded_tokens`` come from ``link`` (all
    computed when ``link`` is None), loads and compute one after the other."""
    if link is None:
        loaded_tokens = 0
    load = simulate_load(model, loaded_tokens, link, chunk_tokens) if link is not None else 0.0
    return load + simulate_prefill(model, loaded_tokens, prompt_tokens, flops)


def recompute_seconds(model: ModelShape, tokens: int, flops: float = PREFILL_FLOPS) -> float:
    """Closed form of :func:`simulate_prefill` from 0: ``(2·P·n + 2·layers·d·n·(n-1)) / F``."""
    return (
        2 * model.params * tokens + 2 * model.layers * model.d_model * tokens * (tokens - 1)
    ) / (flops)


def load_seconds(model: ModelShape, tokens: int, link: Link, chunk_tokens: int = 256) -> float:
    """Closed form of :func:`simulate_load`: a latency per chunk plus bytes over bandwidth."""
    chunks = -(-tokens // chunk_tokens)
    return chunks * link.latency_s + tokens * model.kv_bytes_per_token / link.bandwidth
