"""Readings of the cost model's first diverging call: a load's seconds (the link it is priced
over, the latencies it pays, the bytes it moves), a recompute's two terms, and worth_loading's
answer against the rule's over each tier's link."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.readings.kinds import factor_words
from servelab.grading.readings.kv_offload_rules import shown

__all__ = ["SECONDS_READERS"]


def _link(d: Difference) -> tuple[float, int, float] | None:
    """For ``load_seconds(tokens, tier)``: the link's latency, the chunks the load requests,
    and the reference's seconds."""
    if len(d.args) < 2 or not isinstance(d.args[0], int):
        return None
    link = getattr(d.subject, "links", {}).get(d.args[1])
    per = getattr(d.subject, "chunk_tokens", None)
    theirs = shown(d.returned("theirs"))
    latency = getattr(link, "latency_s", None)
    if not isinstance(per, int) or per < 1 or not isinstance(latency, int | float):
        return None
    if not isinstance(theirs, int | float):
        return None
    return float(latency), -(-d.args[0] // per), float(theirs)


def _other_link(d: Difference, mine: float, chunks: int) -> str | None:
    """The name of another tier whose link gives yours exactly, or None."""
    links = getattr(d.subject, "links", None)
    per_token = getattr(getattr(d.subject, "model", None), "kv_bytes_per_token", None)
    if not isinstance(links, dict) or not isinstance(per_token, int | float):
        return None
    for name, link in links.items():
        try:
            seconds = chunks * link.latency_s + d.args[0] * per_token / link.bandwidth
        except Exception:
            return None
        if name != d.args[1] and math.isclose(mine, seconds, rel_tol=1e-9):
            return str(name)
    return None


def _load_seconds(d: Difference) -> str | None:
    mine = shown(d.returned("mine"))
    link = _link(d)
    if link is None or not isinstance(mine, int | float) or isinstance(mine, bool):
        return None
    latency, chunks, theirs = link
    other = _other_link(d, mine, chunks)
    if other is not None:
        return (
            f"yours returned {mine:.4g} s, the reference {theirs:.4g} s: yours is the load over "
            f"the {other!r} link, where the tier named is {d.args[1]!r}: a load uses the "
            "link of the tier it reads from, self.links[tier]"
        )
    total = factor_words(mine, theirs)
    if total:
        return f"yours returned {mine:.4g} seconds, the reference {theirs:.4g}: {total}"
    transfer = theirs - chunks * latency
    if latency > 0:
        extra = (mine - theirs) / latency
        if abs(extra - round(extra)) < 1e-6 and round(extra) != 0:
            k = round(extra)
            pays = "no chunk request" if k == -chunks else f"{chunks + k} chunk request(s)"
            return (
                f"yours returned {mine:.4g} s, the reference {theirs:.4g} s: the difference is "
                f"{abs(k)} link latency(ies) ({latency:g} s each), as if {pays} paid one "
                f"where the {chunks} chunk request(s) of {d.args[0]} tokens do: a load pays "
                "one latency per chunk, ceil(tokens / chunk_tokens)"
            )
    if transfer > 0:
        slip = factor_words(mine - chunks * latency, transfer)
        if slip:
            return (
                f"the latency part agrees, but yours spends {mine - chunks * latency:.4g} s "
                f"moving the bytes where the reference spends {transfer:.4g} s: {slip} The "
                "bytes are tokens · KV bytes per token, 2 (K and V) · layers · kv_heads · "
                "head_dim · bytes_per_value, over the link's bandwidth in bytes per second"
            )
    return None


def _recompute_seconds(d: Difference) -> str | None:
    """A prefill's time is two terms over the FLOP rate: 2 · params · tokens for the weights,
    2 · layers · d_model · tokens² for attention; which one yours left out, or a unit's factor."""
    mine, theirs = shown(d.returned("mine")), shown(d.returned("theirs"))
    if not isinstance(mine, int | float) or not isinstance(theirs, int | float):
        return None
    slip = factor_words(mine, theirs)
    if slip:
        return f"yours returned {mine:.4g} seconds, the reference {theirs:.4g}: {slip}"
    m: Any = getattr(d.subject, "model", None)
    flops: Any = getattr(d.subject, "flops", None)
    tokens: Any = d.args[0] if d.args else None
    try:
        weights = 2 * m.params * tokens / flops
        attention = 2 * m.layers * m.d_model * tokens * tokens / flops
    except Exception:
        return None
    for term, name, formula in (
        (weights, "attention", "2 · layers · d_model · tokens²"),
        (attention, "weights", "2 · params · tokens"),
    ):
        if math.isclose(mine, term, rel_tol=1e-9):
            return (
                f"yours returned {mine:.4g} s, exactly the reference's without its {name} "
                f"term ({formula}, over flops): a prefill pays both"
            )
    return _term_factor(mine, weights, attention)


_TERMS = (("weights", "2 · params · tokens"), ("attention", "2 · layers · d_model · tokens²"))


def _term_factor(mine: float, weights: float, attention: float) -> str | None:
    """Yours as the reference's two terms with one of them halved or doubled."""
    for i, (name, formula) in enumerate(_TERMS):
        for factor, how in ((0.5, "half"), (2.0, "twice")):
            a, b = (factor, 1.0) if i == 0 else (1.0, factor)
            if math.isclose(mine, a * weights + b * attention, rel_tol=1e-9):
                return (
                    f"yours returned {mine:.4g} s, exactly the reference's with its {name} "
                    f"term counted {how} ({formula} FLOPs, over flops; a multiply-add is "
                    "2 FLOPs): the other term agrees"
                )
    return None


def _worth_loading(d: Difference) -> str | None:
    """Yours answers, over a range of sizes, as the rule would for another tier's link, and
    not as it does for the tier named: the answer is priced over the wrong link."""
    h: Any = d.subject
    if len(d.args) < 2 or not isinstance(getattr(h, "links", None), dict):
        return None
    tier = d.args[1]
    sizes = [2**k for k in range(0, 21, 2)] + [3 * 2**k for k in range(0, 19, 3)]

    def rule(link: Any, n: int) -> bool:
        m = h.model
        load = -(-n // h.chunk_tokens) * link.latency_s + n * m.kv_bytes_per_token / link.bandwidth
        return bool(load < (2 * m.params * n + 2 * m.layers * m.d_model * n * n) / h.flops)

    try:
        mine = [d.probe("worth_loading", n, tier) for n in sizes]
        answers = {
            name: [("returned", rule(link, n)) for n in sizes] for name, link in h.links.items()
        }
        bare = replace(h.links[tier], latency_s=0.0)  # the same link without its latency
        unlatent = mine == [("returned", rule(bare, n)) for n in sizes]
    except Exception:
        return None
    if tier not in answers or mine == answers[tier]:
        return None
    other = [name for name, said in answers.items() if name != tier and said == mine]
    if unlatent and not other:
        return (
            f"yours answers, at every size tried, as a load from {tier!r} would with no "
            "latency: worth_loading compares all of load_seconds(tokens, tier), the "
            "link's latency per chunk request included, with recompute_seconds(tokens)"
        )
    if len(other) != 1 or unlatent:
        return None
    return (
        f"yours answers, at every size tried, as a load from the {other[0]!r} tier would, "
        f"where the tier named is {tier!r}: worth_loading compares load_seconds(tokens, tier), "
        "over that tier's link, with recompute_seconds(tokens)"
    )


SECONDS_READERS = {
    "load_seconds": _load_seconds,
    "worth_loading": _worth_loading,
    "recompute_seconds": _recompute_seconds,
}
