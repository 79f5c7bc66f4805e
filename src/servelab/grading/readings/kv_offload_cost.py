"""Readings of a load_seconds that differs from the cost model, each proved by calling yours
again: the load split into its terms (latency per chunk request, bytes over the bandwidth,
link by link) at several token counts, so that a term yours adds or scales shows as itself."""

from __future__ import annotations

import math
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.readings.kinds import factor_words
from servelab.grading.readings.kv_offload_geometry import kv_geometry

_TOKENS = (1, 300, 2048)  # a partial chunk, a chunk and a bit, whole chunks (256 each)


def _terms(h: Any, tokens: int, tier: str) -> tuple[float, float] | None:
    """The reference's (latency part, bytes part) of a load of ``tokens`` from ``tier``."""
    try:
        link, per = h.links[tier], h.chunk_tokens
        chunks = -(-tokens // per)
        return chunks * link.latency_s, tokens * h.model.kv_bytes_per_token / link.bandwidth
    except Exception:
        return None


def _yours(d: Difference, tokens: int, tier: str) -> float | None:
    got = d.probe("load_seconds", tokens, tier)
    value = got[1]
    if got[0] != "returned" or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return float(value)


def _close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-15)


def _added_link(d: Difference) -> str | None:
    """Yours is the load over the tier's own link plus the whole load over another tier's
    link, at every token count tried, while a load from that other tier alone is right: a
    second hop added, where each tier's link is its whole path to the GPU."""
    h: Any = d.subject
    links = getattr(h, "links", None)
    if len(d.args) < 2 or not isinstance(links, dict) or d.args[1] not in links:
        return None
    tier = d.args[1]
    for other in links:
        if other == tier:
            continue
        ok = True
        for n in (*_TOKENS, d.args[0]):
            own, hop = _terms(h, n, tier), _terms(h, n, other)
            if own is None or hop is None or not _close(_yours(d, n, tier), sum(own) + sum(hop)):
                ok = False
                break
        alone = [_terms(h, n, other) for n in _TOKENS]
        if not ok or any(t is None for t in alone):
            continue
        if not all(
            _close(_yours(d, n, other), sum(t)) for n, t in zip(_TOKENS, alone, strict=True) if t
        ):
            continue
        return (
            f"yours prices a load from {tier!r} as the load over links[{tier!r}] plus the "
            f"whole load over links[{other!r}] (at every token count tried), while a load "
            f"from {other!r} alone agrees: each tier's link is its whole path to the GPU, so "
            f"a load from {tier!r} is priced over links[{tier!r}] only"
        )
    return None


def _latency_scaled(d: Difference) -> str | None:
    """The bytes part agrees and the latency part is a unit's factor of the reference's, at
    every token count tried: the latency read in another unit. A whole multiple is left to
    the reading that counts the latencies paid (requests per chunk, per layer)."""
    h: Any = d.subject
    if len(d.args) < 2 or not isinstance(d.args[0], int):
        return None
    tier = d.args[1]
    said = None
    for n in (d.args[0], *_TOKENS):
        terms, mine = _terms(h, n, tier), _yours(d, n, tier)
        if terms is None or mine is None or terms[0] <= 0:
            return None
        ratio = (mine - terms[1]) / terms[0]
        if math.isclose(ratio, round(ratio), rel_tol=1e-9) and round(ratio) >= 1:
            return None
        words = factor_words(mine - terms[1], terms[0])
        if words is None or (said is not None and words != said):
            return None
        said = said or words
    latency = _terms(h, d.args[0], tier)
    mine = _yours(d, d.args[0], tier)
    if latency is None or mine is None:
        return None
    return (
        f"the bytes part agrees, but yours pays {mine - latency[1]:.4g} s of latency where the "
        f"reference pays {latency[0]:.4g} s (ceil(tokens / chunk_tokens) · latency_s), at "
        f"every token count tried: {said} latency_s is in seconds"
    )


def _whole_chunks(d: Difference) -> str | None:
    """Yours is the reference's latency part plus the bytes of whole chunks, at every token
    count tried: a partial last chunk moved as if it were full."""
    h: Any = d.subject
    if len(d.args) < 2 or not isinstance(d.args[0], int) or d.args[0] <= 0:
        return None
    tier, per = d.args[1], getattr(h, "chunk_tokens", None)
    if not isinstance(per, int) or per < 1 or d.args[0] % per == 0:
        return None
    for n in (d.args[0], *_TOKENS):
        whole = -(-n // per) * per
        terms, padded = _terms(h, n, tier), _terms(h, whole, tier)
        if (
            terms is None
            or padded is None
            or not _close(_yours(d, n, tier), sum(terms[:1]) + padded[1])
        ):
            return None
    n = d.args[0]
    whole = -(-n // per) * per
    return (
        f"yours moves the bytes of whole chunks: a load of {n} tokens costs yours the bytes of "
        f"{whole} ({whole // per} chunk(s) of {per}), at every token count tried (the latency "
        "part agrees). A load moves tokens · KV bytes per token: a partial last chunk moves "
        "only its tokens, though it pays a whole chunk request's latency"
    )


READINGS = (_added_link, _latency_scaled, _whole_chunks, kv_geometry)
