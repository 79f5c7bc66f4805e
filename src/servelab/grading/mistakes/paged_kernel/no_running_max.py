"""attend sums exp(score) without subtracting the running max, which overflows on large scores."""
# ruff: noqa: E741

from servelab.grading.mistakes.paged_kernel import Correct, rebuilt, tl, triton

HINT = "running max"
LIKE = (
    "takes exp of the raw scores without subtracting the running max, so a score above ~88 "
    "overflows to inf (in bf16 as in fp32)"
)


@triton.jit
def attend(
    q,
    k_cache,
    v_cache,
    table,
    seq_len,
    kv_head,
    stride_block,
    stride_slot,
    stride_head,
    scale,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    l = tl.zeros((), tl.float32)
    acc = tl.zeros((HEAD_DIM,), tl.float32)
    for j in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):
        k = load_block(
            k_cache,
            table,
            j,
            seq_len,
            kv_head,
            stride_block,
            stride_slot,
            stride_head,
            BLOCK_SIZE,
            HEAD_DIM,
        )
        v = load_block(
            v_cache,
            table,
            j,
            seq_len,
            kv_head,
            stride_block,
            stride_slot,
            stride_head,
            BLOCK_SIZE,
            HEAD_DIM,
        )
        s = tl.sum(k * q[None, :], axis=1) * scale
        pos = j * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        s = tl.where(pos < seq_len, s, float("-inf"))
        p = tl.exp(s)
        l = l + tl.sum(p, axis=0)
        acc = acc + tl.sum(p[:, None] * v, axis=0)
    return acc / l


load_block = Correct.fn.__globals__["load_block"]
Buggy = rebuilt(Correct, attend=attend)
