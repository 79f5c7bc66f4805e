"""The paged decode kernel that notebook 08's learner writes, as attention backend ``triton``.

The kernel is the notebook's own solution (:mod:`servelab.checkpoints.paged_kernel`, generated
from it), so the reference package serves with exactly the code the course grades, and an
engine can be pointed at a learner's kernel instead (``kernel=``). It is never a default: it is
selected by name (``paged_decode(..., backend="triton")``), because it needs the optional
``triton`` package (Linux wheels, ~290 MB download) and, without a GPU, runs in Triton's
interpreter: exact, and slow by design. Importing the solution without CUDA sets
``TRITON_INTERPRET=1`` before its kernels are decorated (Triton decides per kernel, at
decoration, whether to compile or interpret).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from servelab.kv.attention import DecodeBatch

__all__ = ["triton_decode", "unavailable"]


def unavailable(q: torch.Tensor, kernel: Any = None) -> str | None:
    """Why :func:`triton_decode` cannot run ``q`` here (no triton, or a CPU tensor without
    Triton's interpreter), or None when it can. The caller raises it as its own error."""
    try:
        from servelab.checkpoints import paged_kernel as solution
    except ImportError:
        return (
            "backend 'triton' needs the triton package: `make triton` in the course folder, "
            "or `pip install triton` (Linux)"
        )
    chosen = solution.paged_decode_kernel if kernel is None else kernel
    import triton.language as tl

    interpreted = type(chosen).__name__ == "InterpretedFunction"
    if q.device.type != "cuda" and not (interpreted and type(tl.zeros).__name__ != "JITFunction"):
        return (
            "backend 'triton' on the CPU needs Triton's interpreter: set TRITON_INTERPRET=1 "
            "before triton is first imported"
        )
    return None


def triton_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    batch: DecodeBatch,
    *,
    scale: float | None = None,
    kernel: Any = None,
) -> torch.Tensor:
    """``q [B, Hq, D]`` against one layer's ``[blocks, block_size, Hkv, D]`` caches with the
    notebook's Triton kernel (or ``kernel``, a learner's ``paged_decode_kernel``); call
    :func:`unavailable` first."""
    from servelab.checkpoints import paged_kernel as solution

    chosen = solution.paged_decode_kernel if kernel is None else kernel
    launch: Any = solution.paged_decode  # notebook code: untyped
    out: torch.Tensor = launch(
        q, k_cache, v_cache, batch.tables, batch.lens, scale=scale, kernel=chosen
    )
    return out
