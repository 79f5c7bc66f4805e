"""A reading of an add() that refused a request the reference takes, where the request has
generated tokens: the same request with fewer generated, tried on copies, tells a size that grows
with what it generated (its generated tokens counted beside max_new_tokens) from any other."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference

__all__ = ["sized_with_generated"]


def _ceil(n: int, d: int) -> int:
    return -(-n // d)


def _variant(seq: Any, generated: int) -> Any:
    """The same request (id, prompt, max_new_tokens) with its first ``generated`` tokens."""
    try:
        kept = list(seq.token_ids[: seq.prompt_len + generated])
        return type(seq)(seq.seq_id, kept, seq.prompt_len, seq.max_new_tokens)
    except Exception:
        return None


def sized_with_generated(d: Difference) -> str | None:
    """Yours refuses the request with the tokens it generated and takes it, on a copy, with none
    generated: what a request may ever need does not grow with what it has generated. That it
    counts ``num_tokens + max_new_tokens`` is said only where that size predicts every answer."""
    if d.method != "add" or not d.error("mine").startswith("RequestTooLarge") or d.they_raised:
        return None
    if not d.args:
        return None
    seq: Any = d.args[0]
    try:
        prompt, most = int(seq.prompt_len), int(seq.max_new_tokens)
        generated = len(seq.token_ids) - prompt
        size, limit = d.subject.bm.block_size, d.subject.bm.num_blocks - d.subject.watermark
    except Exception:
        return None
    if generated <= 0 or not all(isinstance(n, int) for n in (size, limit)):
        return None
    takes = {}
    for g in range(generated + 1):
        variant = _variant(seq, g)
        if variant is None:
            return None
        takes[g] = d.probe("add", variant)[0] == "returned"
    if not takes[0] or takes[generated]:
        return None
    whole = prompt + most
    said = (
        f"yours refused sequence {seq.seq_id}, which has generated {generated} of its {most} "
        f"new tokens, yet takes the same request with none generated (on a copy): what a "
        f"request may ever need is its prompt + max_new_tokens ({whole} tokens, "
        f"{_ceil(whole, size)} blocks here), and the tokens it generated are among them"
    )
    twice = all(ok == (_ceil(whole + g, size) <= limit) for g, ok in takes.items())
    if twice:
        said += (
            f"; yours answers as one that sizes it at num_tokens + max_new_tokens "
            f"({whole + generated} tokens), counting them twice"
        )
    return said
