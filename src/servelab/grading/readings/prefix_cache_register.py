"""A ``_register`` that caches nothing because another cached block holds the same tokens under
another hash (another prefix), proven on a copy of the state before the call where those
blocks' stored tokens are made to differ: yours then registers the block."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import SAME, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["register_skipped_equal"]

SKIPPED = WrittenFor((SAME,), below=("hashed", "cached"))
"""Yours registered nothing where the reference caches the block."""


def _at(table: Any, key: Any) -> Any:
    """``table[key]`` for a dict or a list; None where it holds no such entry."""
    try:
        return table[key]
    except (IndexError, KeyError, TypeError):
        return None


def _registers(d: Difference, block: Any, h: Any, others: list[Any]) -> bool | None:
    """Whether yours, on a copy where the stored tokens of ``others`` differ from the call's
    (``others`` empty: the copy as it was), caches ``block`` under ``h``; None where that
    cannot run."""
    try:
        obj = copy.deepcopy(d.subject)
        for b in others:
            obj.tokens[b] = ("another", *obj.tokens[b])
        with line_budget(LINES_PER_CALL):
            obj._register(*d.args)
            return bool(obj.map.get(h) == block and _at(obj.hash, block) == h)
    except (Exception, OutOfLines):
        return None


def register_skipped_equal(d: Difference) -> str | None:
    """Said only where yours registered nothing, the blocks already holding these tokens are
    cached under other hashes, yours skips the block again on a plain copy, and registers it
    on a copy where only those blocks' stored tokens differ."""
    if d.method != "_register" or len(d.args) != 3:
        return None
    block, h, block_tokens = d.args
    if not isinstance(block_tokens, tuple | list):
        return None
    block_tokens = tuple(block_tokens)
    if d.mine.get("hashed") != d.before.get("hashed"):
        return None
    if block not in (d.theirs.get("hashed") or []):
        return None
    try:
        tokens, hashes, cached = d.subject.tokens, d.subject.hash, d.subject.map
        held = tokens.items() if isinstance(tokens, dict) else enumerate(tokens)
        equal = [b for b, t in held if b != block and t is not None and tuple(t) == block_tokens]
        if h in cached or not equal or any(_at(hashes, b) == h for b in equal):
            return None
    except (AttributeError, TypeError):
        return None
    if _registers(d, block, h, []) is not False or _registers(d, block, h, equal) is not True:
        return None
    which = f"block {equal[0]}" if len(equal) == 1 else f"blocks {equal}"
    return SKIPPED.show(
        d,
        f"yours cached nothing for block {block}, whose tokens {tuple(block_tokens)} "
        f"{which} already holds under another hash (another prefix); made again on a copy "
        f"where {which}'s stored tokens differ, yours registers block {block}: yours skips a "
        "block because its tokens are cached, whatever comes before them. A block's identity "
        "is its hash, which covers its whole prefix: equal tokens under another prefix are "
        "another block, so skip only when map already holds h",
    )
