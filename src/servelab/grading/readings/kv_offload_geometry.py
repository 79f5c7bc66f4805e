"""A reading of a load whose bytes part follows another KV geometry than the reference's,
proved by calling yours again: with the link's latency set to 0 (the bytes part alone),
each of the model's numbers doubled in turn. The reference's bytes double with layers,
kv_heads, head_dim and bytes_per_value and with nothing else; a number yours ignores, or
one it follows that the KV does not depend on, shows as itself."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from servelab.grading.kv_offload_terms import load_again
from servelab.grading.readings.difference import Difference

__all__ = ["kv_geometry"]

_KV = ("layers", "kv_heads", "head_dim", "bytes_per_value")
_OTHER = ("d_model", "params")


def _bytes_part(h: Any, tokens: int, tier: Any, model: Any) -> float | None:
    """Your load of ``tokens`` from ``tier`` over its link with no latency, for ``model``."""
    try:
        link = dataclasses.replace(h.links[tier], latency_s=0.0)
    except Exception:
        return None
    return load_again(type(h), h, tokens, tier, link, model)


def kv_geometry(d: Difference) -> str | None:
    """The model's numbers yours leaves out of a load's bytes, or follows where the KV does
    not, each doubled on its own; None where yours follows exactly the reference's."""
    h: Any = d.subject
    if len(d.args) != 2 or not isinstance(d.args[0], int) or d.args[0] <= 0:
        return None
    tokens, tier = d.args
    try:
        model, bandwidth = h.model, h.links[tier].bandwidth
        theirs = tokens * model.kv_bytes_per_token / bandwidth
    except Exception:
        return None
    mine = _bytes_part(h, tokens, tier, model)
    if mine is None or mine <= 0 or math.isclose(mine, theirs, rel_tol=1e-6):
        return None
    left_out, followed = [], []
    for name in (*_KV, *_OTHER):
        try:
            doubled = dataclasses.replace(model, **{name: 2 * getattr(model, name)})
        except Exception:
            return None
        again = _bytes_part(h, tokens, tier, doubled)
        if again is None:
            return None
        same = math.isclose(again, mine, rel_tol=1e-9)
        if name in _KV and same:
            left_out.append(name)
        elif name in _OTHER and not same:
            followed.append((name, again / mine))
    if not left_out and not followed:
        return None
    said = []
    if left_out:
        names = " or ".join(f"model.{n}" for n in left_out)
        said.append(f"doubling {names} doubles the reference's load and leaves yours as it was")
    for name, ratio in followed:
        said.append(
            f"doubling model.{name} leaves the reference's load as it was and multiplies yours "
            f"by {ratio:.4g}"
        )
    heads = ""
    if "d_model" in dict(followed):
        heads = (
            ": a token's KV holds kv_heads · head_dim values per layer for K and for V, "
            "fewer than d_model where query heads share their KV heads"
        )
    return (
        f"with the link's latency set to 0 (the bytes part alone), {'; '.join(said)}. The "
        "KV bytes per token are 2 (K and V) · layers · kv_heads · head_dim · "
        f"bytes_per_value{heads}"
    )
