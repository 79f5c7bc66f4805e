"""The prefix-cache probe of a prompt list the caller changes after ``allocate``: what it tells
where the learner's answer is the same without that change (the list plays no part), and where
the block decoding filled is not found only when the block before it is block 0."""

from __future__ import annotations

import copy
import io
from contextlib import redirect_stdout
from typing import Any

from servelab.grading._script import Script
from servelab.grading.prefix_cache_hints import decode_misnamed
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["own_copy_failure"]

_LATER = "bm.allocate(1, [1, 2, 3, 4, 5])"


def _replay(cls: type, first: list[int] | None) -> tuple[int, list[int], list[int]] | None:
    """On a fresh manager (after ``first`` is allocated as sequence 7, when given): sequence
    0's prompt [1, 2, 3] with no change by the caller, its decode of 4, then the later prompt:
    what that allocate returns, sequence 0's table and sequence 7's ([] without ``first``)."""
    try:
        with line_budget(5 * LINES_PER_CALL), redirect_stdout(io.StringIO()):
            bm = cls(8, 2)
            if first is not None:
                bm.allocate(7, first)
            bm.allocate(0, [1, 2, 3])
            bm.append_slot(0, 4)
            table = list(bm.block_table(0))
            others = [] if first is None else list(bm.block_table(7))
            got = bm.allocate(1, [1, 2, 3, 4, 5])
    except (Exception, OutOfLines):
        return None
    return (got, table, others) if isinstance(got, int) else None


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
    table = _table(bm)
    moved = _replay(type(bm), [8, 8])
    if (
        table is None
        or table[:1] != [0]
        or plain[1] != table
        or moved is None
        or moved[0] != 4
        or moved[2][:1] != [0]
        or moved[1][:1] == [0]
    ):
        return s.fail(head, hint=hint)
    return s.fail(
        f"{head}. Where the block before it is block 0, yours {_filled(bm, table)}; where it "
        f"is block {moved[1][0]} (another prompt took block 0 first, on a fresh manager), yours "
        "caches [3, 4] and returns 4. Block id 0 is a block like any other: only None means no "
        "previous block (`if prev:` is false for block 0; test `prev is not None`)",
        hint=hint,
    )


def _table(bm: Any) -> list[int] | None:
    """Sequence 0's block table on the learner's object, or None where it cannot be read."""
    try:
        with line_budget(LINES_PER_CALL), redirect_stdout(io.StringIO()):
            return list(bm.block_table(0))
    except (Exception, OutOfLines):
        return None


def _filled(bm: Any, table: list[int]) -> str:
    """What the learner's object shows of the block decoding filled, sequence 0's second: the
    hash it holds as the words of the report."""
    if len(table) < 2:
        return "holds no block for [3, 4]"
    block = table[1]
    try:
        with line_budget(2 * LINES_PER_CALL), redirect_stdout(io.StringIO()):
            h = bm.block_hash(block)
            chain = copy.deepcopy(bm)._chain([3, 4])
            root = chain[0][0]
    except (Exception, OutOfLines):
        return f"does not find block {block}, [3, 4], after block 0"
    if h is None:
        return f"leaves block {block}, [3, 4], unhashed"
    if h == root:
        return (
            f"hashed block {block} as a first block, from ROOT (the hash your own `_chain` "
            "gives [3, 4] at position 0)"
        )
    return f"hashed block {block}, [3, 4], under a hash a later prompt does not find"
