"""The free list's order: a queue, and a freed table goes back last block first.

Both rules read only ``free_list()`` (and the freed table), so they hold for any
implementation of the notebook's block manager, whatever it keeps inside.
"""

from __future__ import annotations

from servelab.testing.core import InvariantViolation

__all__ = ["check_free_order", "check_freed_tail_first"]


def check_free_order(before: list[int] | None, after: list[int]) -> None:
    """The free list is a queue: blocks are taken from its left end and freed blocks join its
    right end. So the blocks of ``before`` still free are a run at its right end, they open
    ``after`` in the same order, and every block freed since follows them."""
    if before is None:
        return
    now = set(after)
    kept = [b for b in before if b in now]
    taken = len(before) - len(kept)
    if kept != before[taken:]:
        gone = [b for b in before if b not in now]
        raise InvariantViolation(
            "free-order-take",
            f"the free list went from {before} to {after}: blocks {gone} were taken, but a "
            f"block is taken from the left end of the free list, so {before[:taken]} should "
            "have gone",
        )
    if after[: len(kept)] != kept:
        raise InvariantViolation(
            "free-order-return",
            f"the free list went from {before} to {after}: a freed block joins the right end "
            f"of the free list, after the blocks already free ({kept})",
        )


def check_freed_tail_first(
    code: str, table: list[int], before: list[int], after: list[int]
) -> None:
    """The blocks ``code`` (a free_seq of ``table``) put on the free list come in the reverse of
    the table's order, whichever of them other tables still hold: in a prefix cache the block
    freed first is reused first, so the shareable head of a prompt stays cached longest. Only a
    free list that kept its old blocks as a run at its left end is read; another order is
    :func:`check_free_order`'s to report."""
    if after[: len(before)] != before:
        return
    added = after[len(before) :]
    want = [b for b in reversed(table) if b in set(added)]
    if sorted(added) == sorted(want) and added != want:
        raise InvariantViolation(
            "free-tail-first",
            f"`{code}` put {added} on the free list; the table was {table}, so last block "
            f"first is {want}",
        )
