"""Checks the table length of the first sequence only: passes every hand-made state."""


def Buggy(bm):
    free = bm.free_list()
    assert len(free) == len(set(free))
    held = [0] * bm.num_blocks
    for i, seq in enumerate(bm.sequences()):
        table = bm.block_table(seq)
        if i == 0:
            assert len(table) == -(-bm.seq_len(seq) // bm.block_size)
            assert len(set(table)) == len(table), f"a block listed twice: {table}"
        for block in table:
            held[block] += 1
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block]
        assert (block in free) == (held[block] == 0)


HINT = "every sequence"
