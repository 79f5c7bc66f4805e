"""The prefix-cache probe of a prompt list the caller changes after ``allocate``: what it tells
where the learner's answer is the same without that change (the list plays no part), and where
the block decoding filled is named from ROOT only when the block before it is block 0."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading._script import Script
from servelab.grading.prefix_cache_hints import decode_misnamed
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["own_copy_failure"]

_LATER = "bm.allocate(1, [1, 2, 3, 4, 5])"


def _replay(cls: type, first: list[int] | None) -> tuple[int, list[int]] | None:
    """On a fresh manager (after ``first`` is allocated as sequence 7, when given): sequence
    0's prompt [1, 2, 3] with no change by the caller, its decode of 4, then the later prompt:
    what that allocate returns, and sequence 0's table."""
    try:
        with line_budget(4 * LINES_PER_CALL):
            bm = cls(8, 2)
            if first is not None:
                bm.allocate(7, first)
            bm.allocate(0, [1, 2, 3])
            bm.append_slot(0, 4)
            table = list(bm.block_table(0))
            got = bm.allocate(1, [1, 2, 3, 4, 5])
    except (Exception, OutOfLines):
        return None
    return (got, table) if isinstance(got, int) else None


def own_copy_failure(s: Script, got: Any) -> Exception:
    """The failure of the probe, whose program left ``got`` from its last allocate (not 4)."""
    bm = s.ns["bm"]
    hint = decode_misnamed(bm, 0, [1, 2, 3, 4])
    plain = _replay(type(bm), None)
    if plain is None or plain[0] != got:
        return s.fail(
            "sequence 0's tokens are [1, 2, 3, 4] whatever the caller does with its list "
            f"afterwards, so block [3, 4] is cached: expected 4 cached tokens, got {got}"
        )
    head = (
        f"{_LATER} returned {got}, expected 4: in the reference block [3, 4], filled by "
        f"append_slot(0, 4), is cached and both blocks hit; yours returns {got} too where the "
        "caller leaves its list alone, so that list plays no part"
    )
    table = plain[1]
    moved = _replay(type(bm), [8, 8])
    if table[:1] != [0] or moved is None or moved[0] != 4 or moved[1][:1] == [0]:
        return s.fail(head, hint=hint)
    first = (
        f"hashed block {table[1]} as a first block, from ROOT (the hash your own `_chain` "
        "gives [3, 4] at position 0)"
        if len(table) > 1 and _from_root(bm, table[1])
        else "leaves [3, 4] uncached"
    )
    return s.fail(
        f"{head}. Yours {first} where the block before it is block 0; where it is block "
        f"{moved[1][0]} (another prompt took block 0 first, on a fresh manager), yours caches "
        "[3, 4] and returns 4. Block id 0 is a block like any other: only None means no "
        "previous block (`if prev:` is false for block 0; test `prev is not None`)",
        hint=hint,
    )


def _from_root(bm: Any, block: int) -> bool:
    """Whether ``block``'s hash is the one the learner's own ``_chain`` gives [3, 4] as a
    prompt's first block (on a copy)."""
    try:
        with line_budget(LINES_PER_CALL):
            chain = copy.deepcopy(bm)._chain([3, 4])
        return bool(bm.block_hash(block) == chain[0][0])
    except (Exception, OutOfLines):
        return False
