"""A short chunk explained by what yours charged for the chunks before it, with a proof.

A chunk shorter than min(tokens to run, budget left) says the budget left was smaller than it
should be, not why. One cause is named here only when it predicts the chunk on the call as it
ran *and* on the same call run again with one more token of budget (the cause's answer moves,
or stays, with it): charging a chunk its whole blocks (ceil(num_tokens / block_size) blocks of
block_size tokens) instead of its tokens. Another cost (a sampled token, a block per request)
predicts other numbers on one of the two calls, and the reading keeps to the difference.
A chunk cut back to a block edge is named the same way, where the cut predicts the call and
two re-runs (one and a block's worth more budget).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rerun = Callable[[int], "list[Any] | None"]


def _whole(n: int, size: int) -> int:
    return -(-n // size) * size


def _predicted(chunks: list[Any], budget: int, size: int) -> list[int]:
    """Each chunk's size under whole-block charging: min(tokens to run, what is left)."""
    left, sizes = budget, []
    for c in chunks:
        n = max(0, min(c.seq.num_tokens - c.start, left))
        sizes.append(n)
        left -= _whole(n, size)
    return sizes


def _fits(chunks: list[Any], budget: int, size: int) -> bool:
    return [c.num_tokens for c in chunks] == _predicted(chunks, budget, size)


def whole_blocks_charged(
    chunks: list[Any], budget: int, size: Any, short: Any, said: str, rerun: Rerun
) -> str | None:
    """The sentence naming whole-block charging for the short chunk ``short``, or None.

    ``chunks`` are yours from the call with ``budget``; ``rerun(b)`` gives yours from the
    same call on a copy with budget ``b`` (None when it cannot run)."""
    if not isinstance(size, int) or size < 2 or not _fits(chunks, budget, size):
        return None
    before = chunks[: chunks.index(short)]
    if not before or all(c.num_tokens % size == 0 for c in before):
        return None  # whole blocks of whole-block chunks cost their tokens: nothing to tell
    more = rerun(budget + 1)
    if more is None or [c.seq.seq_id for c in more] != [c.seq.seq_id for c in chunks]:
        return None
    if not _fits(more, budget + 1, size):
        return None
    charged = sum(_whole(c.num_tokens, size) for c in before)
    ran = sum(c.num_tokens for c in before)
    return (
        f"{said}: yours left {budget - charged}, the budget of {budget} less {charged} charged for "
        f"the {ran} tokens before it, that is, their whole blocks of {size} (run again with "
        "one more token of budget, yours moves as that charge predicts). A chunk costs its "
        "num_tokens: only the tokens that run come off the budget, not the blocks they fill"
    )


def _cut(chunks: list[Any], budget: int, size: int) -> list[int]:
    """Each chunk's size when a chunk that cannot take the rest of its request is cut back to
    the last block edge before min(tokens to run, what is left) (0 chunks left out)."""
    left, sizes = budget, []
    for c in chunks:
        need = c.seq.num_tokens - c.start
        n = max(0, min(need, left))
        if n < need:
            n = (c.start + n) // size * size - c.start
        if n > 0:
            sizes.append(n)
        left -= max(n, 0)
    return sizes


def _cut_fits(chunks: list[Any] | None, budget: int, size: int) -> bool:
    return chunks is not None and [c.num_tokens for c in chunks] == _cut(chunks, budget, size)


def cut_to_block_edge(
    chunks: list[Any], budget: int, size: Any, short: Any, said: str, rerun: Rerun
) -> str | None:
    """The sentence naming a chunk cut back to a block edge, or None: the rule predicts
    yours on the call as it ran and run again with one and with ``size`` more tokens of
    budget (a chunk that ends at a block edge by chance ends elsewhere on one of them)."""
    if not isinstance(size, int) or size < 2 or not _cut_fits(chunks, budget, size):
        return None
    end = short.start + short.num_tokens
    if end % size or short.num_tokens == short.seq.num_tokens - short.start:
        return None
    ids = [c.seq.seq_id for c in chunks]
    for more in (budget + 1, budget + size):
        ran = rerun(more)
        if ran is None or [c.seq.seq_id for c in ran] != ids or not _cut_fits(ran, more, size):
            return None
    return (
        f"{said}: yours ends it at position {end}, a block edge (block_size {size}), and run "
        f"again with {budget + 1} and with {budget + size} of budget, it ends a chunk that cannot "
        "take the rest of its request at a block edge each time. A chunk takes min(tokens still "
        "to run, budget left), wherever that ends in a block"
    )


def charged_or_cut(
    chunks: list[Any], budget: int, size: Any, short: Any, said: str, rerun: Rerun
) -> str | None:
    """Whole blocks charged for the chunks before ``short``, else ``short`` cut to a block."""
    return whole_blocks_charged(chunks, budget, size, short, said, rerun) or cut_to_block_edge(
        chunks, budget, size, short, said, rerun
    )
