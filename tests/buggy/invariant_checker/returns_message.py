"""Prints its findings instead of raising: nothing ever fails."""


def Buggy(bm):
    free = bm.free_list()
    if len(free) != len(set(free)):
        print("a block is on the free list twice")
    return None


HINT = "twice"
