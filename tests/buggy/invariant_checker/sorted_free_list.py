"""Expects the free list in ascending order, which no real manager keeps."""

from servelab.testing.block_manager import check_block_manager_invariants


def Buggy(bm):
    check_block_manager_invariants(bm)
    assert bm.free_list() == sorted(bm.free_list()), "the free list is out of order"


HINT = "any order"
