"""attend gives the empty slots of the last partial block a score of 0 instead of none."""
# ruff: noqa: E741

from servelab.grading.mistakes.paged_kernel import Correct, rebuilt, tl, triton

HINT = "mask their scores"
LIKE = (
    "scores the empty slots of the last partial block as 0, so they take softmax weight: "
    "mask their scores to -inf"
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
    m = tl.full((), float("-inf"), tl.float32)
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
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        l = l * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    return acc / l


load_block = Correct.fn.__globals__["load_block"]
Buggy = rebuilt(Correct, attend=attend)
