"""A waiting request left waiting with budget to spare, read against the block size, with a
proof.

The budget counts tokens. A request whose tokens to run all fit the budget left is admitted,
however few tokens that is. One cause of leaving it waiting is named here only where re-runs
put the line exactly at a block: your ``admit``, run again on copies of the scheduler as it was,
admits that request when a whole block of budget is left for it and not when one token less is,
every chunk before it the same on both copies. A test of the chunk against a block (no chunk
under a block) leaves a request that fits whole alone, so it never comes here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rerun = Callable[[int], "tuple[list[Any], Any, Any] | None"]


def _head(obj: Any) -> Any:
    waiting = getattr(obj, "waiting", None)
    return waiting[0] if waiting else None


def _admitted(ran: tuple[list[Any], Any, Any] | None, sid: Any) -> bool | None:
    """Whether the re-run gave request ``sid`` a chunk; None when it could not run."""
    if ran is None:
        return None
    return any(c.seq.seq_id == sid for c in ran[0])


def _before(ran: tuple[list[Any], Any, Any] | None, sid: Any) -> list[tuple[Any, int]] | None:
    """The chunks the re-run scheduled before request ``sid``'s, as (id, tokens)."""
    if ran is None:
        return None
    found = []
    for c in ran[0]:
        if c.seq.seq_id == sid:
            break
        found.append((c.seq.seq_id, c.num_tokens))
    return found


def block_of_budget(
    budget: int, ran: tuple[list[Any], Any, Any], theirs_waiting: Any, rerun: Rerun
) -> str | None:
    """Yours, with ``ran`` its call run again (chunks, returned, the copy after it), left at
    the head of waiting a request that the reference admits and whose tokens fit the budget
    left, less than a block; proven by the two re-runs around a block of budget left."""
    chunks, _, obj = ran
    head = _head(obj)
    size = getattr(getattr(obj, "bm", None), "block_size", None)
    cap = getattr(obj, "max_num_seqs", None)
    running = getattr(obj, "running", None)
    if (
        head is None
        or not isinstance(size, int)
        or size < 2
        or not isinstance(theirs_waiting, list)
    ):
        return None
    if isinstance(cap, int) and isinstance(running, list) and len(running) >= cap:
        return None
    sid = head.seq_id
    if any(entry[0] == sid for entry in theirs_waiting if isinstance(entry, tuple)):
        return None
    # the chunks before it took their whole rest, so more budget leaves them as they are
    if any(c.start + c.num_tokens != c.seq.num_tokens for c in chunks):
        return None
    left = budget - sum(c.num_tokens for c in chunks)
    lookup = getattr(obj, "cached_tokens", None)
    try:
        hit = lookup(head) if callable(lookup) else 0
    except Exception:
        return None
    need = head.num_tokens - (hit if isinstance(hit, int) else 0)
    if not 0 < need <= left < size:
        return None
    at_block, short = rerun(budget + size - left), rerun(budget + size - 1 - left)
    if _admitted(at_block, sid) is not True or _admitted(short, sid) is not False:
        return None
    earlier = [(c.seq.seq_id, c.num_tokens) for c in chunks]
    if _before(at_block, sid) != earlier or _before(short, sid) != earlier:
        return None
    tokens = "token" if need == 1 else "tokens"
    return (
        f"yours left request {sid} waiting with {need} {tokens} to run and {left} of the "
        f"budget left, less than a block ({size} tokens): run again from the same state, "
        f"yours admits it with {size} left and not with {size - 1}. The budget counts "
        "tokens, not blocks: a request whose tokens to run fit the budget left is admitted "
        "(admit while budget > 0), however much less than a block that is"
    )
