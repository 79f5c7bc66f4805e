"""Checks the free list against refcounts only: a held block on the free list with its
refcount intact passes."""


def Buggy(bm):
    free = bm.free_list()
    assert len(free) == len(set(free))
    for block in free:
        assert bm.refcount(block) == 0 or block in free
    held = [0] * bm.num_blocks
    for seq in bm.sequences():
        table = bm.block_table(seq)
        assert len(table) == -(-bm.seq_len(seq) // bm.block_size)
        assert len(set(table)) == len(table), f"a block listed twice: {table}"
        for block in table:
            held[block] += 1
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block]
        if not held[block]:
            assert block in free


HINT = "held by no table"
