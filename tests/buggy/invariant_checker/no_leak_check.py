"""Never asks whether a block that no table holds is on the free list."""


def Buggy(bm):
    free = bm.free_list()
    assert len(free) == len(set(free))
    for block in free:
        assert bm.refcount(block) == 0
    held = [0] * bm.num_blocks
    for seq in bm.sequences():
        table = bm.block_table(seq)
        assert len(table) == -(-bm.seq_len(seq) // bm.block_size)
        assert len(set(table)) == len(table), f"a block listed twice: {table}"
        for block in table:
            held[block] += 1
            assert block not in free
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block]


HINT = "leaked"
