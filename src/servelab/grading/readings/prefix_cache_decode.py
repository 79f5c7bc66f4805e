"""A decode's hash that no field shows: the fields say which blocks are hashed, not under which
hash, so an ``append_slot`` that names a filled block under another hash than the reference's
differs in no call a report can show. Replaying the program on the learner's class and on the
same class with the reference's ``append_slot`` grafted in finds the call that fills the block
differently; what yours stored there, and over which parent's hash, is read off both objects."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_REPLAY, OutOfLines, line_budget

__all__ = ["decode_hash_place"]

_BUILT = re.compile(r"^\s*(\w+)\s*=\s*(\w+)\(")
_APPEND = re.compile(r"^\s*(?:\w+\s*=\s*)?(\w+)\.append_slot\((.*)\)\s*(#.*)?$")
_ERRORS = ("OutOfBlocks", "UnknownSequence", "SequenceExists", "InvalidLength")


def _namespace(program: str, cls: Any) -> dict[str, Any]:
    """The names a program uses: its constructor's class bound to ``cls``, the block errors."""
    from servelab.kv import blocks

    ns: dict[str, Any] = {e: getattr(blocks, e) for e in _ERRORS}
    for line in program.splitlines():
        if m := _BUILT.match(line):
            ns.setdefault(m.group(2), cls)
    return ns


def _hashes(ns: dict[str, Any], name: str) -> dict[int, Any]:
    bm = ns.get(name)
    if bm is None:
        return {}
    return {b: bm.block_hash(b) for b in range(bm.num_blocks)}


def _grafted(impl: Any) -> Any:
    """``impl`` with the reference's ``append_slot`` (step 2's, the one that names a filled
    block) in its place; every other method the learner's."""
    from servelab import checkpoint

    reference = checkpoint("prefix-cache", 2).append_slot
    return type(impl.__name__, (impl,), {"append_slot": reference})


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(None), contextlib.redirect_stderr(None):
        yield


def _first_fill_apart(program: str, impl: Any) -> tuple[str, int, Any, Any, Any] | None:
    """The first ``append_slot`` line after which yours and the grafted class hold another
    hash for some block: (the line, how many equal lines came before it, the block, your
    object, the grafted one); None when no such line is found within the replay budget."""
    mine_ns, their_ns = _namespace(program, impl), _namespace(program, _grafted(impl))
    seen: dict[str, int] = {}
    with _quiet(), line_budget(LINES_PER_REPLAY):
        for line in program.splitlines():
            if not line.strip():
                continue
            for ns in (mine_ns, their_ns):
                with contextlib.suppress(Exception):
                    exec(line, ns)  # the grader's own program, as the report shows it
            m = _APPEND.match(line)
            if not m:
                continue
            earlier = seen.get(line.strip(), 0)
            seen[line.strip()] = earlier + 1
            mine, theirs = _hashes(mine_ns, m.group(1)), _hashes(their_ns, m.group(1))
            apart = [b for b in theirs if mine.get(b) != theirs[b]]
            if apart:
                name = m.group(1)
                return line.strip(), earlier, apart[0], mine_ns[name], their_ns[name]
    return None


def _ordinal(n: int) -> str:
    return {1: "2nd", 2: "3rd"}.get(n, f"{n + 1}th")


def decode_hash_place(d: Difference) -> str | None:
    """For a hidden ``append_slot``: the call that fills a block under another hash than the
    reference's, the block and its parent; that yours hashed it over a parent with no hash
    (None) is said only where yours equals ``hash((None, its tokens))``, and over another
    block's hash only where it equals ``hash((that hash, its tokens))``. Another hash of no
    cause seen gives None: the check's own words stand."""
    if not d.hidden or d.method != "append_slot" or d.impl is None or not d.program:
        return None
    try:
        found = _first_fill_apart(d.program, d.impl)
    except OutOfLines:
        return None
    if found is None:
        return None
    line, earlier, block, mine, theirs = found
    try:
        filled = theirs.tokens[block]
        mine_h, their_h = mine.block_hash(block), theirs.block_hash(block)
        holder = next((s for s in theirs.sequences() if block in theirs.block_table(s)), None)
        table = list(theirs.block_table(holder)) if holder is not None else []
    except Exception:
        return None
    call = f"`{line}`" if not earlier else f"the {_ordinal(earlier)} `{line}`"
    if their_h is None or not isinstance(filled, tuple) or block not in table[1:]:
        return None
    parent = table[table.index(block) - 1]
    try:
        parent_h = mine.block_hash(parent)
    except Exception:
        return None
    said = f"{call} fills block {block} with {filled}"
    if mine_h is None:
        return (
            f"{said}, and yours leaves it unhashed where the reference's `append_slot` names "
            "it (hash values are not among the fields shown, so no call differs in them)"
        )
    if parent_h is None and mine_h == hash((None, filled)):
        return (
            f"{said}; block {parent} before it in sequence {holder}'s table has no hash (a "
            f"full block left private), and yours hashed block {block} as hash((None, "
            f"{filled})), over that missing hash. A later prompt with the same tokens looks "
            "up the hash its chain gives (`_chain(tokens)[-1][0]`), so where the parent has "
            "no hash, compute the block's hash from the sequence's tokens on the chain"
        )
    over = _hashed_over(mine, table, block, parent, mine_h, filled)
    if over is not None:
        return (
            f"{said}; yours hashed it as hash((hash of block {over}, {filled})), over block "
            f"{over}'s hash, but its parent is block {parent}, the block just before it in "
            f"sequence {holder}'s table: a filled block's hash is hash((parent's hash, its own "
            "tokens)), the hash a later prompt with the same tokens gets from `_chain`"
        )
    if parent_h is None:  # the place and the difference, no cause: the hash is not shown
        return (
            f"{said}; block {parent} before it in sequence {holder}'s table has no hash, and "
            "yours hashed the filled block under another hash than the reference's "
            "`append_slot` gives it (hash values are not among the fields shown, so no call "
            "differs in them): where the parent has no hash, its hash is the one a prompt with "
            "the same tokens gets from `_chain`"
        )
    return None  # another hash, of no cause seen here: the check's own words stand


def _hashed_over(
    mine: Any, table: list[Any], block: Any, parent: Any, mine_h: Any, filled: Any
) -> Any:
    """The block of the table, not the parent, whose hash yours chained the filled block on,
    as ``hash((its hash, filled))`` equals yours; None where no one block's does."""
    for other in table:
        if other in (block, parent):
            continue
        try:
            h = mine.block_hash(other)
        except Exception:
            return None
        if h is not None and hash((h, filled)) == mine_h:
            return other
    return None
