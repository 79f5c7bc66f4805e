"""Readings of topic ``paged-kernel``: the oracle with one rule changed.

A kernel whose mistake the catalogue does not list may still compute the oracle's attention
with one rule broken: the scores never multiplied by ``scale``, the tokens of a partial last
block left out, a sequence's table row read at ``tables + seq``. Each variant here is that
attention, computed in plain torch over the case's own tensors. The hint names one only when
the learner's outputs equal it on the failing case and on every fixed case of the step, and
no other variant's do: the same proof the catalogue's mistakes need.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Variant", "variant_like"]


@dataclass(frozen=True)
class Variant:
    """One rule changed: ``like`` completes "gives exactly the numbers of one that …"."""

    name: str
    steps: tuple[int, ...]
    like: str
    rows: Callable[[Any, Any], list[list[int]] | None]
    lens: Callable[[Any], list[int]]
    scale: Callable[[Any], float]


def _own_rows(case: Any, t: Any) -> list[list[int]]:
    return [list(row) for row in case.tables]


def _unstrided_rows(case: Any, t: Any) -> list[list[int]] | None:
    """Sequence ``s``'s table read from the padded tables' memory at offset ``s``."""
    flat = [int(b) for b in t.tables.flatten().tolist()]
    rows = []
    for s, n in enumerate(case.lens):
        width = -(-n // case.block_size)
        if s + width > len(flat):
            return None  # the kernel would read past the tables: an error, not these numbers
        rows.append(flat[s : s + width])
    return rows


def _own_lens(case: Any) -> list[int]:
    return list(case.lens)


def _whole_blocks(case: Any) -> list[int]:
    return [n // case.block_size * case.block_size for n in case.lens]


def _scaled(case: Any) -> float:
    return 1.0 / math.sqrt(case.head_dim)


VARIANTS = (
    Variant(
        "unscaled",
        (2, 3),
        "never multiplies the scores by scale: softmax(K q) instead of softmax(K q * scale), "
        "scale = 1 / sqrt(head_dim)",
        _own_rows,
        _own_lens,
        lambda case: 1.0,
    ),
    Variant(
        "whole blocks only",
        (2, 3),
        "attends to the full blocks only: the tokens of a partial last block get no weight "
        "(and a sequence shorter than one block gets 0 / 0); loop over "
        "tl.cdiv(seq_len, BLOCK_SIZE) blocks",
        _own_rows,
        _whole_blocks,
        _scaled,
    ),
    Variant(
        "table row unstrided",
        (3,),
        "reads sequence s's block table at tables + s: the rows of the tables are stride_tb "
        "apart, so sequence s's row starts at tables + s * stride_tb",
        _unstrided_rows,
        _own_lens,
        _scaled,
    ),
)


def _attention(case: Any, t: Any, variant: Variant) -> Any | None:
    """The variant's output ``[B, Hq, D]`` in fp32 (NaN where a sequence attends to nothing),
    rounded to the output's dtype at step 3, or None where it does not apply."""
    import torch

    rows = variant.rows(case, t)
    if rows is None:
        return None
    q, k, v = t.q.float(), t.k.float(), t.v.float()
    out = torch.full(q.shape, float("nan"))
    size, scale = case.block_size, variant.scale(case)
    for s, (row, n) in enumerate(zip(rows, variant.lens(case), strict=True)):
        if n <= 0:
            continue
        blocks = torch.tensor([row[p // size] for p in range(n)])
        offsets = torch.arange(n) % size
        for h in range(case.q_heads):
            keys = k[blocks, offsets, h // case.group]
            values = v[blocks, offsets, h // case.group]
            out[s, h] = torch.softmax(keys @ q[s, h] * scale, dim=0) @ values
    return out


def variant_like(
    step: int,
    fn: Any,
    cases: Sequence[Any],
    same: Callable[[Any, Any], bool],
) -> Variant | None:
    """The one variant whose outputs equal ``fn``'s on every case (the failing one first),
    or None. An error of the learner's function on a case ends the reading: no claim."""
    from servelab.testing import paged_kernel as pk

    left = [v for v in VARIANTS if step in v.steps]
    for case in cases:
        try:
            got = pk.run_step(step, fn, case)[0]
        except Exception:
            return None
        t = pk.tensors(case)
        kept = []
        for variant in left:
            theirs = _attention(case, t, variant)
            if theirs is None:
                continue
            if step == 3:
                theirs = theirs.to(t.q.dtype).float()
            if same(got, theirs):
                kept.append(variant)
        left = kept
        if not left:
            return None
    return left[0] if len(left) == 1 else None
