"""What a prefix cache's ``allocate`` answers: the cached tokens, read against the prompt's
length and its new blocks when yours answers another number and changes what the reference
changes."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import VALUE, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["cached_by_subtraction"]

ANSWERED = WrittenFor((VALUE,))
"""Only the number allocate returned differs."""


def _less_new_slots(n: int, hits: int, size: int) -> int:
    """The prompt's tokens less the slots of the blocks it takes new."""
    return n - (-(-n // size) - hits) * size


def _again(d: Difference, tokens: list[Any]) -> tuple[int, Any] | None:
    """(the hits your ``_lookup`` finds for ``tokens``, what your ``allocate`` of them
    returns as a new sequence), each on a copy of the state before the call."""
    ids = [s for s in d.before.get("tables", {}) if isinstance(s, int)]
    fresh = max([*ids, d.args[0] if isinstance(d.args[0], int) else 0]) + 1
    try:
        with line_budget(LINES_PER_CALL):
            hits = len(copy.deepcopy(d.subject)._lookup(list(tokens)))
            return hits, copy.deepcopy(d.subject).allocate(fresh, list(tokens))
    except (Exception, OutOfLines):
        return None


def cached_by_subtraction(d: Difference) -> str | None:
    """Yours returned the prompt's length less the slots of its new blocks, where the cached
    tokens are the hits' blocks times the block size: they part by the unused end of a partial
    last block. Said only when a prompt ``block_size`` tokens longer gets the same formula's
    number from yours again."""
    if d.method != "allocate" or len(d.args) < 2 or d.differ:
        return None
    tokens, size = d.args[1], getattr(d.subject, "block_size", 0)
    mine, theirs = d.returned("mine"), d.returned("theirs")
    if not isinstance(tokens, list | tuple) or type(size) is not int or size < 1:
        return None
    if not (mine and theirs and mine.lstrip("-").isdigit() and theirs.isdigit()):
        return None
    n, got, want = len(tokens), int(mine), int(theirs)
    hits = want // size
    if n % size == 0 or want % size or got != _less_new_slots(n, hits, size):
        return None
    top = max((t for t in tokens if isinstance(t, int)), default=0)
    longer = [*tokens, *[top + 1] * size]
    again = _again(d, longer)
    if again is None or again[1] != _less_new_slots(len(longer), again[0], size):
        return None
    new = -(-n // size) - hits
    return ANSWERED.show(
        d,
        f"yours returned {got} for a prompt of {n} tokens with {hits} cached "
        f"block{'s' if hits != 1 else ''}: its {n} tokens less the {new * size} slots of its "
        f"{new} new block{'s' if new != 1 else ''} ({size} a block); made again with {size} "
        f"more tokens, yours returns {again[1]}: its {len(longer)} tokens less the slots of "
        f"its {-(-len(longer) // size) - again[0]} new blocks. allocate answers the cached "
        f"tokens, the hit blocks' tokens: len(hits) * block_size = {want}; the slots of the "
        f"new blocks count the {size - n % size} empty slots at the end of the partial last "
        "block too",
    )
