"""load_block loads the whole last block, the slots past the sequence's length included."""

from servelab.grading.mistakes.paged_kernel import Correct, rebuilt, tl, triton

HINT = "sequence length"
LIKE = (
    "reads the slots of the last block beyond the sequence length: mask the load with "
    "`j * BLOCK_SIZE + offs < seq_len` and load 0 there"
)


@triton.jit
def load_block(
    cache,
    table,
    j,
    seq_len,
    head,
    stride_block,
    stride_slot,
    stride_head,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    block = tl.load(table + j)
    offs = tl.arange(0, BLOCK_SIZE)
    dims = tl.arange(0, HEAD_DIM)
    ptrs = (
        cache
        + block * stride_block
        + offs[:, None] * stride_slot
        + head * stride_head
        + dims[None, :]
    )
    return tl.load(ptrs).to(tl.float32)


Buggy = rebuilt(Correct, load_block=load_block)
