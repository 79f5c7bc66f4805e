"""A prompt block an allocate left without a hash: its place, read off the call; whether the
hashing goes wrong only after a prefix hit, or skips the prompt's last full block, said only
where a replay on a fresh manager of yours (no prefix hit) shows it. A block a decode filled
and left without a hash after a parent that has none: said where a replay with the parent
hashed names it."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.observe import prefix_fields
from servelab.grading.readings.difference import Difference
from servelab.grading.readings.prefix_cache_returns import rule_chain
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget


def left_unhashed(d: Difference) -> str | None:
    """An allocate whose table is the reference's, with a block the reference hashes left
    without a hash by yours and none hashed in its place: the block and its position, and
    whether it is the prompt's last full block, read off the call; then what replays show."""
    seq, tokens = (d.args[0], d.args[1]) if len(d.args) > 1 else (None, None)
    table = d.theirs.get("tables", {}).get(seq)
    mine, theirs = d.mine.get("hashed"), d.theirs.get("hashed")
    size = getattr(d.subject, "block_size", 0)
    if not (isinstance(table, list) and isinstance(mine, list) and isinstance(theirs, list)):
        return None
    if not d.differ <= {"hashed", "cached"} or any(b not in theirs for b in mine):
        return None
    missing = [b for b in theirs if b not in mine and b in table]
    if len(missing) != 1 or not isinstance(tokens, list | tuple) or not isinstance(size, int):
        return None
    b, at = missing[0], table.index(missing[0])
    last = size > 0 and at == len(tokens) // size - 1
    which = ", the prompt's last full block" if last else ""
    said = (
        f"yours left block {b} (position {at} of sequence {seq}'s table{which}) without a hash, "
        "where the reference hashes it: every full block an allocate takes new is registered "
        "under its chain entry"
    )
    shown = d.returned("theirs") or ""
    hits = int(shown) // size if shown.isdigit() and size > 0 else 0
    fresh = [_unhashed_fresh(d, list(tokens))]
    if hits > 0 and fresh[0] == []:
        return said + _after_hit(d, b, at, hits, list(tokens))
    if last:
        longer = [*tokens, *[max(tokens, default=0) + 1] * size]
        fresh.append(_unhashed_fresh(d, longer))
        if fresh == [[at], [at + 1]]:
            return (
                f"{said}, the last full one too; only a partial last block stays unhashed. "
                "Replayed on a fresh manager of yours, with no prefix hit, yours again leaves "
                "the prompt's last full block alone without a hash, and with one more full "
                "block the new last one instead"
            )
    return said


def _unhashed_fresh(d: Difference, tokens: list[Any]) -> list[int] | None:
    """The positions of the full blocks yours leaves without a hash when ``tokens`` is the
    first prompt of a fresh manager of yours (nothing cached, so no prefix hit); None when it
    cannot be run, or finds a hit."""
    size = d.subject.block_size
    need = -(-len(tokens) // size)
    seq = d.args[0]
    try:
        with line_budget(LINES_PER_CALL):
            bm = type(d.subject)(max(d.subject.num_blocks, need), size)
            if bm.allocate(seq, list(tokens)) != 0:
                return None
            seen = prefix_fields(bm)
    except (Exception, OutOfLines):
        return None
    table, hashed = seen.get("tables", {}).get(seq), seen.get("hashed")
    if not isinstance(table, list) or not isinstance(hashed, list) or len(table) != need:
        return None
    return [p for p in range(len(tokens) // size) if table[p] not in hashed]


def _after_hit(d: Difference, block: Any, at: int, hits: int, tokens: list[Any]) -> str:
    """The prompt hashes whole on a fresh manager: the hashing goes wrong after a hit only.
    Whether the chain entry counts from the first new block is asked only where your call,
    run again on a copy with ``_register`` watched, registers ``block`` under the entry of
    position at - hits of your own chain."""
    told = (
        f". Replayed on a fresh manager of yours, where this prompt has no prefix hit, yours "
        f"hashes every full block: the hashing goes wrong only after a prefix hit ({hits} "
        "block(s) here)"
    )
    asked, chain = registered_calls(d), d.probe("_chain", tokens)
    if asked is None or chain[0] != "returned" or not isinstance(chain[1], list):
        return told
    entries = chain[1]
    if at >= len(entries) or at - hits < 0:
        return told
    under = [a[1] for a in asked if len(a) > 1 and a[0] == block]
    if under != [entries[at - hits][0]] or entries[at - hits][0] == entries[at][0]:
        return told
    return (
        f"{told}; yours registered block {block} under the chain's entry {at - hits}, not "
        f"{at}: is the chain entry of a new block indexed from the prompt's start (entry i "
        "for the block at position i of the table), or from the first new block?"
    )


def registered_calls(d: Difference) -> list[tuple[Any, ...]] | None:
    """The arguments of every ``_register`` your call makes, run again on a copy; None when it
    cannot be run again."""
    try:
        obj = copy.deepcopy(d.subject)
        asked: list[tuple[Any, ...]] = []
        register = obj._register

        def spied(*args: Any) -> Any:
            asked.append(args)
            return register(*args)

        obj._register = spied
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(*d.args)
    except (Exception, OutOfLines):
        return None
    return asked


def unnamed_after_private(d: Difference, block: Any) -> str | None:
    """Your ``append_slot`` filled ``block`` and never registered it, where the block before
    it in the table has no hash (it stayed private: an equal block was cached first). Said
    only when, on a copy where that parent carries its chain hash, the same call names
    ``block`` by the chain: yours names a filled block only after a hashed parent."""
    seq = d.args[0] if d.args else None
    table = d.mine.get("tables", {}).get(seq)
    hashed = d.before.get("hashed")
    size = getattr(d.subject, "block_size", 0)
    if not (isinstance(table, list) and isinstance(hashed, list) and type(size) is int):
        return None
    if block not in table or table.index(block) < 1 or size < 1:
        return None
    at = table.index(block)
    parent = table[at - 1]
    if parent in hashed:
        return None
    try:
        obj = copy.deepcopy(d.subject)
        tokens = [*obj.seq_tokens[seq], *d.args[1:2]]
        chain = rule_chain(tokens, size)
        if len(chain) != at + 1:
            return None
        obj.hash[parent] = chain[at - 1]
        with line_budget(LINES_PER_CALL):
            obj.append_slot(*d.args)
        named = obj.hash[block] == chain[at]
    except (Exception, OutOfLines):
        return None
    if not named:
        return None
    return (
        f"yours did not register block {block}, which this call filled: the block before it, "
        f"{parent}, has no hash (it stayed private, as an equal block was cached first); made "
        f"again on a copy where block {parent} carries its chain hash, yours names block "
        f"{block}: yours names a filled block only after a hashed parent. Where the parent "
        "has none, hash the block on the chain of the sequence's tokens (_chain), and "
        "register it all the same"
    )
