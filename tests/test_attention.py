"""Paged decode attention equals dense attention, whichever backend computes it."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from servelab.kv.attention import (  # noqa: E402
    DecodeBatch,
    FlexDecoder,
    InvalidBackend,
    dense_attention,
    paged_decode,
)
from servelab.kv.blocks import InvalidBlock, InvalidLength  # noqa: E402
from servelab.kv.pool import ShapeMismatch  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def scatter_case(
    lens: list[int], block_size: int, num_blocks: int, hq: int, hkv: int, d: int, seed: int
) -> tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    list[torch.Tensor],
    list[torch.Tensor],
    list[list[int]],
]:
    """Contiguous per-sequence K/V, and the same values scattered over a shuffled pool."""
    gen = torch.Generator().manual_seed(seed)
    k_cache = torch.randn(num_blocks, block_size, hkv, d, generator=gen)
    v_cache = torch.randn(num_blocks, block_size, hkv, d, generator=gen)
    order = torch.randperm(num_blocks, generator=gen).tolist()
    tables, ks, vs = [], [], []
    for n in lens:
        need = -(-n // block_size)
        table, order = order[:need], order[need:]
        k = torch.randn(n, hkv, d, generator=gen)
        v = torch.randn(n, hkv, d, generator=gen)
        for i in range(n):
            k_cache[table[i // block_size], i % block_size] = k[i]
            v_cache[table[i // block_size], i % block_size] = v[i]
        tables.append(table)
        ks.append(k)
        vs.append(v)
    q = torch.randn(len(lens), hq, d, generator=gen)
    return q, k_cache, v_cache, ks, vs, tables


def dense_reference(
    q: torch.Tensor, ks: list[torch.Tensor], vs: list[torch.Tensor]
) -> torch.Tensor:
    rows = []
    for i, (k, v) in enumerate(zip(ks, vs, strict=True)):
        out = dense_attention(
            q[i][None, :, None, :], k.transpose(0, 1)[None], v.transpose(0, 1)[None]
        )
        rows.append(out[0, :, 0, :])
    return torch.stack(rows)


paged_cases = given(
    lens=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    block_size=st.sampled_from([1, 4, 16]),
    heads=st.sampled_from([(4, 4), (4, 2), (6, 1)]),
    seed=st.integers(0, 2**16),
)


def check_paged_equals_dense(
    backend: str, lens: list[int], block_size: int, heads: tuple[int, int], seed: int
) -> None:
    hq, hkv = heads
    num_blocks = sum(-(-n // block_size) for n in lens) + 3
    q, k_cache, v_cache, ks, vs, tables = scatter_case(
        lens, block_size, num_blocks, hq, hkv, 8, seed
    )
    dev = _triton_device() if backend == "triton" else "cpu"
    batch = DecodeBatch.build(
        tables, lens, block_size=block_size, num_blocks=num_blocks, device=dev
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # flex's "not compiled" notice
        got = paged_decode(
            q.to(dev),
            k_cache.to(dev),
            v_cache.to(dev),
            batch,
            backend=backend,  # type: ignore[arg-type]
        ).cpu()
    tol = 1e-5 if dev == "cpu" else 1e-4  # another summation order on the GPU
    torch.testing.assert_close(got, dense_reference(q, ks, vs), rtol=tol, atol=tol)


def _triton_device() -> str:
    """Where backend 'triton' runs in this process: compiled on CUDA when there is a GPU,
    else on the CPU through Triton's interpreter (conftest sets it without a GPU)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@settings(max_examples=20, deadline=None)
@paged_cases
def test_gather_oracle_equals_dense(
    lens: list[int], block_size: int, heads: tuple[int, int], seed: int
) -> None:
    check_paged_equals_dense("gather", lens, block_size, heads, seed)


@settings(max_examples=5, deadline=None)  # eager flex scores the whole pool: slow
@paged_cases
def test_flex_block_mask_equals_dense(
    lens: list[int], block_size: int, heads: tuple[int, int], seed: int
) -> None:
    check_paged_equals_dense("flex-eager", lens, block_size, heads, seed)


def test_backends_ignore_stale_data_outside_the_tables() -> None:
    lens = [5, 9]
    q, k_cache, v_cache, ks, vs, tables = scatter_case(lens, 4, 12, 2, 2, 4, seed=3)
    batch = DecodeBatch.build(tables, lens, block_size=4, num_blocks=12)
    want = paged_decode(q, k_cache, v_cache, batch, backend="gather")
    used = {b for t in tables for b in t}
    for b in range(12):  # poison every unused block and every slot past each length
        if b not in used:
            k_cache[b] = 1e4
            v_cache[b] = 1e4
    k_cache[tables[0][-1], 1:] = 1e4
    k_cache[tables[1][-1], 1:] = 1e4
    for backend in ("gather", "flex-eager"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            got = paged_decode(q, k_cache, v_cache, batch, backend=backend)  # type: ignore[arg-type]
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(want, dense_reference(q, ks, vs))


def test_decode_batch_validates_tables() -> None:
    with pytest.raises(InvalidLength):
        DecodeBatch.build([[0, 1]], [9], block_size=4, num_blocks=8)  # needs 3 blocks
    with pytest.raises(InvalidLength):
        DecodeBatch.build([[0]], [0], block_size=4, num_blocks=8)
    with pytest.raises(InvalidLength):
        DecodeBatch.build([[0]], [1, 2], block_size=4, num_blocks=8)
    with pytest.raises(InvalidBlock):
        DecodeBatch.build([[8]], [3], block_size=4, num_blocks=8)


def test_paged_decode_rejects_bad_shapes_and_backends() -> None:
    q, k_cache, v_cache, _, _, tables = scatter_case([3], 4, 4, 4, 2, 8, seed=1)
    batch = DecodeBatch.build(tables, [3], block_size=4, num_blocks=4)
    with pytest.raises(InvalidBackend):
        paged_decode(q, k_cache, v_cache, batch, backend="vllm")  # type: ignore[arg-type]
    with pytest.raises(ShapeMismatch):
        paged_decode(q[:, :3], k_cache, v_cache, batch)  # 3 query heads over 2 kv heads
    with pytest.raises(ShapeMismatch):
        paged_decode(q, k_cache[:2], v_cache[:2], batch)


@pytest.mark.gpu
@needs_cuda
def test_compiled_flex_matches_oracle_on_cuda() -> None:
    lens = [1, 17, 100, 250]
    q, k_cache, v_cache, _, _, tables = scatter_case(lens, 16, 64, 8, 2, 64, seed=0)
    dev = torch.device("cuda")
    batch = DecodeBatch.build(tables, lens, block_size=16, num_blocks=64, device=dev)
    args = (q.to(dev), k_cache.to(dev), v_cache.to(dev), batch)
    torch.testing.assert_close(
        paged_decode(*args, backend="flex"),
        paged_decode(*args, backend="gather"),
        rtol=1e-4,
        atol=1e-4,
    )


def test_flex_decoder_reuses_its_buffers_across_steps_and_pads_buckets() -> None:
    """One decoder, batches of changing size and content: each answer is right, the
    block-mask buffers are the same objects every time (what keeps a compiled kernel
    from recompiling), and padding rows never leak into real rows."""
    nb, bs = 24, 4
    decoder = FlexDecoder(nb, bs, torch.device("cpu"), compiled=False, min_bucket=4)
    masks = set()
    for seed, lens in enumerate([[3, 9], [1, 5, 8, 2, 7], [12], [4, 4, 4]]):
        q, k_cache, v_cache, ks, vs, tables = scatter_case(lens, bs, nb, 4, 2, 8, seed)
        batch = DecodeBatch.build(tables, lens, block_size=bs, num_blocks=nb)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            got = decoder(q, k_cache, v_cache, batch, block_mask=decoder.prepare(batch))
        torch.testing.assert_close(got, dense_reference(q, ks, vs), rtol=1e-5, atol=1e-5)
        masks.add(id(decoder.prepare(batch)))
    assert len(masks) == 2  # buckets of 4 and 8 rows, each built once


def test_compiled_flex_compiles_once_per_bucket_and_never_falls_back_to_eager() -> None:
    """Batches of nine different sizes compile three kernels (buckets of 2, 4 and 8 rows),
    with no graph break; past its recompile limit the compiled function raises instead of
    quietly running eagerly. ``aot_eager`` stands in for inductor: dynamo's guards and
    counters are the same, and it compiles in about a second instead of a minute."""
    import torch._dynamo
    import torch._dynamo.config as dynamo_config
    from torch._dynamo.exc import FailOnRecompileLimitHit
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    nb, bs = 24, 4
    decoder = FlexDecoder(
        nb, bs, torch.device("cpu"), compiled=True, min_bucket=2, compile_backend="aot_eager"
    )
    graphs = counters["stats"]["unique_graphs"]
    breaks = sum(counters["graph_break"].values())
    for seed, lens in enumerate([[3], [5, 9], [1, 2, 7], [4] * 5, [6, 2], [8] * 7, [2], [3] * 8]):
        q, k_cache, v_cache, ks, vs, tables = scatter_case(lens, bs, nb, 4, 2, 8, seed)
        batch = DecodeBatch.build(tables, lens, block_size=bs, num_blocks=nb)
        got = decoder(q, k_cache, v_cache, batch)
        torch.testing.assert_close(got, dense_reference(q, ks, vs), rtol=1e-5, atol=1e-5)
    compiled = counters["stats"]["unique_graphs"] - graphs
    assert compiled == 3
    assert compiled <= dynamo_config.recompile_limit
    assert sum(counters["graph_break"].values()) == breaks
    q = q.double()  # a guard that fails on a warm bucket: dynamo wants to recompile
    with dynamo_config.patch(recompile_limit=1), pytest.raises(FailOnRecompileLimitHit):
        decoder(q, k_cache.double(), v_cache.double(), batch)


# bf16 keeps 8 significant bits; paged and dense attention round at different points.
# Stated tolerance: 2e-2 relative and absolute (outputs are O(1) averages of values).
BF16_TOL = {"rtol": 2e-2, "atol": 2e-2}


@pytest.mark.parametrize("backend", ["gather", "flex-eager"])
def test_paged_decode_in_bf16_is_within_stated_tolerance_of_dense(backend: str) -> None:
    lens = [1, 9, 33, 16]
    q, k_cache, v_cache, ks, vs, tables = scatter_case(lens, 16, 12, 8, 2, 32, seed=5)
    batch = DecodeBatch.build(tables, lens, block_size=16, num_blocks=12)
    bf = torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = paged_decode(q.to(bf), k_cache.to(bf), v_cache.to(bf), batch, backend=backend)  # type: ignore[arg-type]
    assert got.dtype == bf
    want = dense_reference(q, ks, vs)  # fp32 on the same values
    torch.testing.assert_close(got.float(), want, **BF16_TOL)


def test_batches_pad_to_power_of_two_buckets_up_to_a_bounded_largest() -> None:
    from servelab.kv.attention import _bucket

    assert [_bucket(b, 16) for b in (1, 16, 17, 33, 100, 2048)] == [16, 16, 32, 64, 128, 2048]
    assert _bucket(5, 0) == 5  # eager: no padding
    with pytest.raises(InvalidBackend):
        _bucket(2049, 16)  # past 8 buckets: refused, not compiled again


# --- backend "triton": notebook 08's kernel (the Triton interpreter without a GPU) ----------


@settings(max_examples=10, deadline=None)
@paged_cases
def test_triton_kernel_equals_dense(
    lens: list[int], block_size: int, heads: tuple[int, int], seed: int
) -> None:
    pytest.importorskip("triton")
    check_paged_equals_dense("triton", lens, block_size, heads, seed)


def test_triton_backend_ignores_stale_data_and_equals_the_oracle_in_bf16() -> None:
    pytest.importorskip("triton")
    lens = [5, 9]
    q, k_cache, v_cache, _, _, tables = scatter_case(lens, 4, 12, 4, 2, 8, seed=3)
    batch = DecodeBatch.build(tables, lens, block_size=4, num_blocks=12)
    want = paged_decode(q, k_cache, v_cache, batch, backend="gather")
    used = {b for t in tables for b in t}
    for b in set(range(12)) - used:
        k_cache[b] = 1e4
        v_cache[b] = 1e4
    k_cache[tables[0][-1], 1:] = 1e4  # past sequence 0's length
    dev = _triton_device()
    on = DecodeBatch.build(tables, lens, block_size=4, num_blocks=12, device=dev)
    q, k_cache, v_cache = q.to(dev), k_cache.to(dev), v_cache.to(dev)
    got = paged_decode(q, k_cache, v_cache, on, backend="triton").cpu()
    loose = {} if dev == "cpu" else {"rtol": 1e-4, "atol": 1e-4}  # the GPU sums in another order
    torch.testing.assert_close(got, want, **loose)
    bf = torch.bfloat16
    got = paged_decode(q.to(bf), k_cache.to(bf), v_cache.to(bf), on, backend="triton").cpu()
    assert got.dtype == bf
    q, k_cache, v_cache = (t.to(bf).float().cpu() for t in (q, k_cache, v_cache))
    oracle = paged_decode(q, k_cache, v_cache, batch)
    torch.testing.assert_close(got.float(), oracle, **BF16_TOL)


def test_triton_is_never_a_default_backend() -> None:
    from servelab.kv.attention import DecodeAttention

    batch = DecodeBatch.build([[0]], [1], block_size=4, num_blocks=2)
    assert DecodeAttention(batch).backend == "gather"  # on CPU; flex on CUDA


@pytest.mark.gpu
@needs_cuda
def test_triton_kernel_compiled_on_cuda_matches_the_oracle() -> None:
    pytest.importorskip("triton")
    lens = [1, 17, 64, 100]
    q, k_cache, v_cache, _, _, tables = scatter_case(lens, 16, 24, 8, 2, 64, seed=9)
    dev = torch.device("cuda")
    batch = DecodeBatch.build(tables, lens, block_size=16, num_blocks=24, device=dev)
    for dtype, tol in ((torch.float32, {"rtol": 1e-4, "atol": 1e-4}), (torch.bfloat16, BF16_TOL)):
        args = [t.to(dev, dtype) for t in (q, k_cache, v_cache)]
        got = paged_decode(*args, batch, backend="triton")
        want = paged_decode(*(a.float() for a in args), batch, backend="gather")
        torch.testing.assert_close(got.float(), want, **tol)
