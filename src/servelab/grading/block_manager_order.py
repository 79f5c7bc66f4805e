"""Block-manager probes on the order of a table: apart from the topic module to keep it short."""

from __future__ import annotations

from servelab.grading._script import Script


def table_in_taken_order(s: Script) -> None:
    """A table lists its blocks in the order ``_alloc`` hands them out, the free list's left
    end first: logical block i is the i-th block taken. Read against the implementation's own
    free list, out of id order after a table was freed tail first, and only where the blocks
    taken are the right ones (which blocks are taken is the free-order checks' to report)."""
    s("bm = BlockManager(4, 1)")
    s("bm.allocate(0, 3)")
    s("bm.free_seq(0)")
    free = list(s("bm.free_list()"))
    s("bm.allocate(1, 3)")
    table = list(s("bm.block_table(1)"))
    left = free[: len(table)]
    s.check(
        table == left or sorted(table) != sorted(left),
        f"bm.block_table(1) is {table}; the free list was {free}: allocate takes its blocks "
        "from the left end of the free list one by one, and the table lists them in the order "
        f"taken ({free[: len(table)]}), logical block i the i-th block taken",
        "table-order",
    )
