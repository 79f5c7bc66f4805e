"""load_block steps from block to block by block_size * head_dim, as if there were one head."""

from servelab.grading.mistakes.paged_kernel import Correct, rebuilt, tl, triton

HINT = "stride"
LIKE = (
    "steps from block to block by BLOCK_SIZE * HEAD_DIM, the stride of a one-head pool: "
    "use stride_block, which counts every head of a block"
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
        + block * BLOCK_SIZE * HEAD_DIM
        + offs[:, None] * stride_slot
        + head * stride_head
        + dims[None, :]
    )
    inside = (j * BLOCK_SIZE + offs) < seq_len
    return tl.load(ptrs, mask=inside[:, None], other=0.0).to(tl.float32)


Buggy = rebuilt(Correct, load_block=load_block)
