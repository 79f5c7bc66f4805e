"""Compares the sum of the refcounts with the number of table entries, not block by block."""


def Buggy(bm):
    free = bm.free_list()
    assert len(free) == len(set(free))
    for block in free:
        assert bm.refcount(block) == 0
    entries = 0
    for seq in bm.sequences():
        table = bm.block_table(seq)
        assert len(table) == -(-bm.seq_len(seq) // bm.block_size)
        assert len(set(table)) == len(table), f"a block listed twice: {table}"
        entries += len(table)
    assert sum(bm.refcount(b) for b in range(bm.num_blocks)) == entries
    held = {b for seq in bm.sequences() for b in bm.block_table(seq)}
    for block in range(bm.num_blocks):
        assert (block in held) != (block in free)


HINT = "its own holders"
