"""The scheduler's Prefill fields past the request and its length: ``num_cached``.

The scheduler's block manager keeps no prefix cache, and a preemption by recompute frees every
block of its victim: no token of a request that ``admit`` prefills holds KV, whether it is new or
comes back from a preemption, so every Prefill says ``num_cached`` 0 and the engine computes all
its tokens.
"""

from __future__ import annotations

from typing import Any

from servelab.testing.core import InvariantViolation


def check_prefill_cached(out: Any, prompt: dict[int, int], code: str) -> None:
    """Raise ``prefill-length`` naming the first Prefill in ``out.prefills`` whose num_cached
    is not 0 (``prompt``: each request's prompt length, to tell a returning one)."""
    for p in out.prefills:
        cached = getattr(p, "num_cached", 0)
        if cached == 0:
            continue
        sid, n = p.seq.seq_id, p.num_tokens
        why = (
            f"sequence {sid} comes back from a preemption by recompute, which freed every one "
            f"of its blocks, so none of its {n} tokens holds KV"
            if n > prompt.get(sid, n)
            else f"no token of sequence {sid} holds KV yet (this block manager keeps no prefix "
            "cache)"
        )
        raise InvariantViolation(
            "prefill-length",
            f"`{code}` admitted sequence {sid} with Prefill(seq, {n}, num_cached={cached}); "
            f"expected num_cached 0: {why}, and the engine skips computing the first "
            "num_cached tokens",
        )
