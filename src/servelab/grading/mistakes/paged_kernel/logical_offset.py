"""load_block addresses the logical block instead of the physical block the table names."""

from servelab.grading.mistakes.paged_kernel import Correct, rebuilt, tl, triton

HINT = "block table"
LIKE = (
    "addresses logical block j itself instead of the physical block the block table lists "
    "for it: load `tl.load(table + j)` and use that block"
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
    offs = tl.arange(0, BLOCK_SIZE)
    dims = tl.arange(0, HEAD_DIM)
    ptrs = (
        cache + j * stride_block + offs[:, None] * stride_slot + head * stride_head + dims[None, :]
    )
    inside = (j * BLOCK_SIZE + offs) < seq_len
    return tl.load(ptrs, mask=inside[:, None], other=0.0).to(tl.float32)


Buggy = rebuilt(Correct, load_block=load_block)
