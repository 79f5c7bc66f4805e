"""Checkpoints of the 'paged-kernel' course notebook: its solution, step by step.

Generated from solutions/08_paged_kernel_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('paged-kernel', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


import os
import torch
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton
import triton.language as tl


@triton.jit
def load_block(cache, table, j, seq_len, head, stride_block, stride_slot, stride_head,
               BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Tile [BLOCK_SIZE, HEAD_DIM] of logical block j (fp32), zero at positions >= seq_len."""
    block = tl.load(table + j)  # the physical block, through the table
    offs = tl.arange(0, BLOCK_SIZE)
    dims = tl.arange(0, HEAD_DIM)
    ptrs = (cache + block * stride_block + offs[:, None] * stride_slot
            + head * stride_head + dims[None, :])
    inside = (j * BLOCK_SIZE + offs) < seq_len  # the last block may be partly empty
    return tl.load(ptrs, mask=inside[:, None], other=0.0).to(tl.float32)


@triton.jit
def attend(q, k_cache, v_cache, table, seq_len, kv_head, stride_block, stride_slot, stride_head,
           scale, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):
    """softmax(K q * scale) @ V over one sequence's blocks, online; returns [HEAD_DIM] fp32."""
    m = tl.full((), float("-inf"), tl.float32)  # running max of the scores
    l = tl.zeros((), tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros((HEAD_DIM,), tl.float32)  # running sum of exp(score - m) * v
    for j in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):
        k = load_block(k_cache, table, j, seq_len, kv_head, stride_block, stride_slot,
                       stride_head, BLOCK_SIZE, HEAD_DIM)
        v = load_block(v_cache, table, j, seq_len, kv_head, stride_block, stride_slot,
                       stride_head, BLOCK_SIZE, HEAD_DIM)
        s = tl.sum(k * q[None, :], axis=1) * scale
        pos = j * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        s = tl.where(pos < seq_len, s, float("-inf"))  # empty slots get no weight
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)  # rescales what was summed under the old max
        p = tl.exp(s - m_new)
        l = l * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    return acc / l


@triton.jit
def paged_decode_kernel(q, k_cache, v_cache, tables, lens, out, stride_qb, stride_qh, stride_tb,
                        stride_block, stride_slot, stride_head, scale,
                        GROUP: tl.constexpr, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):
    """One program per (sequence, query head): out[seq, head] = attend(q[seq, head], ...)."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    dims = tl.arange(0, HEAD_DIM)
    row = seq * stride_qb + head * stride_qh
    query = tl.load(q + row + dims).to(tl.float32)
    seq_len = tl.load(lens + seq)
    o = attend(query, k_cache, v_cache, tables + seq * stride_tb, seq_len, head // GROUP,
               stride_block, stride_slot, stride_head, scale, BLOCK_SIZE, HEAD_DIM)
    tl.store(out + row + dims, o.to(out.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, tables, lens, *, scale=None, kernel=None):
    """Launch the kernel: q [B, Hq, D]; caches [blocks, block_size, Hkv, D]; tables [B, w] and
    lens [B] int32. Returns [B, Hq, D] in q's dtype."""
    kernel = paged_decode_kernel if kernel is None else kernel
    batch, q_heads, head_dim = q.shape
    _, block_size, kv_heads, _ = k_cache.shape
    if q_heads % kv_heads or k_cache.stride(3) != 1 or q.stride(2) != 1:
        raise ValueError("q heads must group over kv heads, with a contiguous last dimension")
    tables, lens = tables.to(torch.int32).contiguous(), lens.to(torch.int32).contiguous()
    out = torch.empty_like(q)
    scale = head_dim**-0.5 if scale is None else scale
    kernel[(batch, q_heads)](
        q, k_cache, v_cache, tables, lens, out, q.stride(0), q.stride(1), tables.stride(0),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), scale,
        GROUP=q_heads // kv_heads, BLOCK_SIZE=block_size, HEAD_DIM=head_dim,
    )
    return out


TOPIC = 'paged-kernel'
STEPS = {
    1: lambda: load_block,
    2: lambda: attend,
    3: lambda: paged_decode_kernel,
}
