"""What a prefix cache's ``allocate`` answers and how it names its new blocks: the cached
tokens, read against the prompt's length and its new blocks; a new block's hash, read against
the chain of the whole prompt and of the tokens after the hits."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import SAME, VALUE, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["cached_by_subtraction", "chained_from_rest", "counted_after", "rule_chain"]

ROOT = 0

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


def _cached_tokens(obj: Any, tokens: list[Any]) -> Any:
    """``num_cached_tokens(tokens)`` on a copy of ``obj``; None when it raises or runs long."""
    try:
        with line_budget(LINES_PER_CALL):
            return copy.deepcopy(obj).num_cached_tokens(list(tokens))
    except (Exception, OutOfLines):
        return None


def counted_after(d: Difference) -> str | None:
    """Yours returned what ``num_cached_tokens`` answers for the prompt once the call is over
    (the blocks it has just cached counted as hits), where the same question asked of the
    state before the call answers the reference's number: both read on copies of yours."""
    if d.method != "allocate" or len(d.args) < 2 or d.differ:
        return None
    tokens, mine, theirs = d.args[1], d.returned("mine"), d.returned("theirs")
    if not isinstance(tokens, list | tuple) or not (mine and theirs and mine.isdigit()):
        return None
    if not theirs.isdigit() or mine == theirs:
        return None
    after = d.after()
    if after is None or _cached_tokens(after, list(tokens)) != int(mine):
        return None
    if _cached_tokens(d.subject, list(tokens)) != int(theirs):
        return None
    return ANSWERED.show(
        d,
        f"yours returned {mine}, what num_cached_tokens answers for this prompt after the "
        f"call, on a copy of yours that holds the blocks this allocate has just cached; "
        f"asked before the call, it answers {theirs}, the reference's answer. allocate returns "
        "the tokens that were cached when it began (its hits): the blocks it caches itself "
        "are not hits of this prompt",
    )


NAMED_FROM_REST = WrittenFor((SAME,), above=("hashed", "cached"))
"""The same table and answer; yours named (cached) blocks the reference leaves private."""


def rule_chain(tokens: Any, size: int) -> list[Any]:
    """The hashes of the full blocks of ``tokens``, each on its parent's, from ROOT."""
    chain, parent = [], ROOT
    for k in range(len(tokens) // size):
        parent = hash((parent, tuple(tokens[k * size : (k + 1) * size])))
        chain.append(parent)
    return chain


def chained_from_rest(d: Difference) -> str | None:
    """Yours named the new blocks of a prompt with hits by a chain over the tokens after the
    hits, started again from ROOT: read off the hashes yours left on a copy after the call,
    each new block's equal to that chain's entry and at least one unlike the whole prompt's."""
    if d.method != "allocate" or len(d.args) < 2:
        return None
    seq, tokens = d.args[0], d.args[1]
    size, shown = getattr(d.subject, "block_size", 0), d.returned("theirs") or ""
    if not isinstance(tokens, list | tuple) or type(size) is not int or size < 1:
        return None
    if not shown.isdigit() or int(shown) % size or not int(shown):
        return None
    hits, obj = int(shown) // size, d.after()
    table = getattr(obj, "tables", {}).get(seq) if obj is not None else None
    stored = getattr(obj, "hash", None)
    if not isinstance(table, list) or not isinstance(stored, list | dict):
        return None
    rest, whole = rule_chain(tokens[hits * size :], size), rule_chain(tokens, size)
    named = []
    for p, block in enumerate(table[hits:], hits):
        if isinstance(stored, dict):
            h = stored.get(block)
        else:
            h = stored[block] if type(block) is int and 0 <= block < len(stored) else None
        if h is not None:
            if p - hits >= len(rest) or h != rest[p - hits]:
                return None
            named.append((p, block))
    wrong = [(p, b) for p, b in named if p < len(whole) and whole[p] != rest[p - hits]]
    if not wrong:
        return None
    p, block = wrong[0]
    cached = getattr(d.subject, "map", None)
    taken = cached.get(whole[p]) if isinstance(cached, dict) else None
    private = (
        f" (that hash already names block {taken}, so the reference leaves block {block} uncached)"
        if taken is not None
        else ""
    )
    return NAMED_FROM_REST.show(
        d,
        f"yours named block {block} (position {p} of sequence {seq}'s table) by the chain of "
        f"the tokens after the {hits} hit block{'s' if hits != 1 else ''} alone "
        f"({list(tokens[hits * size :])}), started again from ROOT: its "
        f"hash is that chain's entry {p - hits}. Block i of a table is named by the whole "
        f"prompt's chain entry i, over every block before it, hits included{private}",
    )
