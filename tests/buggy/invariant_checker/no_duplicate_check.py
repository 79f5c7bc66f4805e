"""Checks refcounts and table lengths but never looks for a block on the free list twice."""


def Buggy(bm):
    free = set(bm.free_list())
    held = [0] * bm.num_blocks
    for seq in bm.sequences():
        table = bm.block_table(seq)
        assert len(table) == -(-bm.seq_len(seq) // bm.block_size)
        assert len(set(table)) == len(table), f"a block listed twice: {table}"
        for block in table:
            held[block] += 1
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block]
        assert (block in free) == (held[block] == 0)


HINT = "twice"
