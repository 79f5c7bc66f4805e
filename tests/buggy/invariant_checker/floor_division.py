"""Table length as len // block_size + 1: wrong on a block boundary and for empty sequences."""


def Buggy(bm):
    free = bm.free_list()
    held = [0] * bm.num_blocks
    for seq in bm.sequences():
        table = bm.block_table(seq)
        assert len(table) == bm.seq_len(seq) // bm.block_size + 1
        assert len(set(table)) == len(table), f"a block listed twice: {table}"
        for block in table:
            held[block] += 1
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block]
        assert (block in free) == (held[block] == 0)


HINT = "ceil"
