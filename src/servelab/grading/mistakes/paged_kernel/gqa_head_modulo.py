"""The kernel maps query head h to kv head h % kv_heads instead of h // GROUP."""

from servelab.grading.mistakes.paged_kernel import Correct, rebuilt, tl, triton

HINT = "kv head"
LIKE = (
    "maps query head h to kv head h % kv_heads; under grouped-query attention GROUP "
    "consecutive query heads share one kv head: h // GROUP"
)


@triton.jit
def paged_decode_kernel(
    q,
    k_cache,
    v_cache,
    tables,
    lens,
    out,
    stride_qb,
    stride_qh,
    stride_tb,
    stride_block,
    stride_slot,
    stride_head,
    scale,
    GROUP: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    dims = tl.arange(0, HEAD_DIM)
    row = seq * stride_qb + head * stride_qh
    query = tl.load(q + row + dims).to(tl.float32)
    seq_len = tl.load(lens + seq)
    kv_heads = tl.num_programs(1) // GROUP
    o = attend(
        query,
        k_cache,
        v_cache,
        tables + seq * stride_tb,
        seq_len,
        head % kv_heads,
        stride_block,
        stride_slot,
        stride_head,
        scale,
        BLOCK_SIZE,
        HEAD_DIM,
    )
    tl.store(out + row + dims, o.to(out.dtype.element_ty))


attend = Correct.fn.__globals__["attend"]
Buggy = rebuilt(Correct, paged_decode_kernel=paged_decode_kernel)
