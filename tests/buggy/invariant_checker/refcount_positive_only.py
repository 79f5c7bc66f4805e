"""Checks only that held blocks have a positive refcount, not that it equals the holders."""


def Buggy(bm):
    free = bm.free_list()
    assert len(free) == len(set(free))
    for block in free:
        assert bm.refcount(block) == 0
    for seq in bm.sequences():
        table = bm.block_table(seq)
        assert len(table) == -(-bm.seq_len(seq) // bm.block_size)
        assert len(set(table)) == len(table), f"a block listed twice: {table}"
        for block in table:
            assert bm.refcount(block) > 0
            assert block not in free


HINT = "table entries that hold it"
