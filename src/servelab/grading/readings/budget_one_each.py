"""A reading of a ``schedule_running`` that gave a running request one token, a decode's share,
while more of its tokens were still to compute and the budget had room for them: every chunk of
the call, run again on a copy, is one token long, so the report says which request was cut."""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference

__all__ = ["one_token_each"]


def one_token_each(d: Difference, chunks: list[Any]) -> str | None:
    """The first request yours scheduled one token where min(its tokens not computed, the
    budget left) is more, where every chunk yours scheduled in the call is one token; not of a
    token that ends the prompt (a chunk cut at the prompt's end gives that one too)."""
    if d.method != "schedule_running" or not chunks or not isinstance(d.args[1], int):
        return None
    try:
        if any(c.num_tokens != 1 for c in chunks):
            return None
        left = d.args[1]
        for c in chunks:
            todo = c.seq.num_tokens - c.start
            # a token that ends the prompt exactly fits a chunk cut at the prompt's end too
            if todo > 1 and left > 1 and c.start + 1 != c.seq.prompt_len:
                return (
                    f"yours scheduled request {c.seq.seq_id} one token (from {c.start}) though "
                    f"{todo} of its {c.seq.num_tokens} tokens are not computed yet and the budget "
                    f"left is {left}: a running request takes min(its tokens not computed, the "
                    "budget left); one token is a decode's share, once all it holds is computed"
                )
            left -= 1
    except Exception:  # a chunk of another shape
        return None
    return None
