"""Demands refcount 1 for every used block: rejects every fork."""

from servelab.testing.block_manager import check_block_manager_invariants


def Buggy(bm):
    check_block_manager_invariants(bm)
    for seq in bm.sequences():
        for block in bm.block_table(seq):
            assert bm.refcount(block) == 1, f"block {block} is shared"


HINT = "refcount above 1 is legal"
