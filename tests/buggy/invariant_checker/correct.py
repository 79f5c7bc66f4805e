"""A correct learner-style invariant checker; the other files here each miss one rule."""


def check_invariants(bm):
    free = bm.free_list()
    assert len(free) == len(set(free)), f"a block is on the free list twice: {free}"
    for block in free:
        assert bm.refcount(block) == 0, f"free block {block} has refcount {bm.refcount(block)}"
    held = [0] * bm.num_blocks
    for seq in bm.sequences():
        table, n = bm.block_table(seq), bm.seq_len(seq)
        want = -(-n // bm.block_size)
        assert len(table) == want, f"sequence {seq}: {n} tokens need {want} blocks, has {table}"
        assert len(set(table)) == len(table), f"a block listed twice: {table}"
        for block in table:
            held[block] += 1
    for block in range(bm.num_blocks):
        assert bm.refcount(block) == held[block], (
            f"block {block}: refcount {bm.refcount(block)}, held by {held[block]} entries"
        )
        assert (block in free) == (held[block] == 0), f"block {block} is free and held, or neither"
