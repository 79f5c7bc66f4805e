"""A ``retire`` that keeps finished sequences running because it decides from a count of its
own that stands one short of the tokens they generated, proven on copies of the scheduler as it
was before the call: with each one's ``max_new_tokens`` one lower, yours retires them; with one
more token in the sequence itself, yours still keeps them (its decision does not follow the
sequence's own count)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["retired_by_own_count"]


def _kept_after(d: Any, left: list[Any], change: Callable[[Any], None]) -> list[Any] | None:
    """The sequences of ``left`` still running after your ``retire`` on a copy where
    ``change`` was made to each of them first; None where that cannot run."""
    try:
        obj, args = copy.deepcopy((d.subject, d.args))
        seqs = [s for s in obj.running if getattr(s, "seq_id", None) in left]
        if len(seqs) != len(left):
            return None
        for s in seqs:
            change(s)
        with line_budget(LINES_PER_CALL):
            obj.retire(*args)
        running = {getattr(s, "seq_id", None) for s in obj.running}
    except (Exception, OutOfLines):
        return None
    return [s for s in left if s in running]


def _lower(s: Any) -> None:
    s.max_new_tokens -= 1


def _one_more(s: Any) -> None:
    s.token_ids.append(s.token_ids[-1])


def retired_by_own_count(d: Any, left: list[Any]) -> str | None:
    """Said only where every sequence of ``left`` is finished (generated == max_new_tokens),
    yours kept them all, retires them all on a copy with max_new_tokens one lower, and keeps
    them all on a copy where each holds one more generated token."""
    if d.method != "retire" or not left:
        return None
    try:
        seqs = [s for s in d.subject.running if getattr(s, "seq_id", None) in left]
        made = {s.seq_id: (s.num_generated, s.max_new_tokens) for s in seqs}
    except (AttributeError, TypeError):
        return None
    if len(made) != len(left) or any(g != m or m < 2 for g, m in made.values()):
        return None
    if _kept_after(d, left, lambda s: None) != left:
        return None
    if _kept_after(d, left, _lower) != [] or _kept_after(d, left, _one_more) != left:
        return None
    if len(left) == 1:
        n = made[left[0]][0]
        kept = f"sequence {left[0]} running though it has generated its {n} tokens"
        lower = f"max_new_tokens one lower ({n - 1})"
        more = f"one more token in the sequence itself ({n + 1} generated)"
        it, generated = "it", f"the {n} generated"
    else:
        kept = f"sequences {left} running though each has generated its max_new_tokens"
        lower = "each one's max_new_tokens one lower"
        more = "one more token in each sequence itself"
        it, generated = "them", "the tokens generated"
    return (
        f"yours kept {kept}; made again on copies: with {lower} yours retires {it}, and with "
        f"{more} yours still keeps {it}: yours decides "
        "from a count of its own, not the sequence's tokens, and that count, as yours "
        f"compares it, is one short of {generated}. Does it leave out the token the "
        "prefill sampled? A sequence has generated len(token_ids) - prompt_len tokens, the "
        "prefill's first: retire it once seq.is_finished, freeing its blocks (bm.free_seq) "
        "and dropping it from running"
    )
