"""A lookup whose answer depends on more than ``map`` and the prompt's full blocks: asked, on a
copy of the same object, for the same prompt with its last token (a token in no full block)
changed, yours gives the reference's hits. The answer the call gave was not read off the cache
as it stands, which no cap, chain or verification mistake explains."""

from __future__ import annotations

import ast
from typing import Any

from servelab.grading.readings.difference import Difference

__all__ = ["lookup_kept"]

_NEVER = -1
"""A token no probe caches: the changed last token of the prompt."""


def _listed(shown: str | None) -> list[Any] | None:
    try:
        value = ast.literal_eval(shown or "")
    except (ValueError, SyntaxError):
        return None
    return list(value) if isinstance(value, list | tuple) else None


def lookup_kept(d: Difference) -> str | None:
    """``_lookup(tokens)`` returned other hits than the reference's, while on a copy it gives
    its own answer again for ``tokens`` and the reference's for ``tokens`` with the last token
    changed (the last token sits in a partial block, so no full block differs); else None."""
    mine, theirs = _listed(d.returned("mine")), _listed(d.returned("theirs"))
    tokens = d.args[0] if d.args else None
    size = getattr(d.subject, "block_size", 0)
    if mine is None or theirs is None or mine == theirs:
        return None
    if not isinstance(tokens, list | tuple) or not tokens or not isinstance(size, int):
        return None
    if size < 1 or len(tokens) % size == 0 or tokens[-1] == _NEVER:
        return None
    altered = [*tokens[:-1], _NEVER]
    again, same = d.probe("_lookup", list(tokens))
    other, found = d.probe("_lookup", altered)
    if again != "returned" or other != "returned":
        return None
    if _listed(repr(same)) != mine or _listed(repr(found)) != theirs:
        return None
    return (
        f"yours answered {mine} for {list(tokens)}; on a copy of the same object it answers "
        f"{theirs}, as the reference does, for {altered}, which differs only in the last token, "
        "a token in no full block: yours answered from more than map and the prompt's full "
        "blocks. Did it keep the answer of an earlier lookup of the same prompt? A lookup "
        "reads map as it is at the call"
    )
