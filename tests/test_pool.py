"""The KV block pool: slot writes, batched copy-on-write, swap, and its validation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from servelab.kv.blocks import InvalidBlock, InvalidConfig  # noqa: E402
from servelab.kv.pool import KVPool, ShapeMismatch, pinning_available  # noqa: E402

L, NB, BS, H, D = 2, 8, 4, 2, 3
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def make_pool() -> KVPool:
    pool = KVPool(L, NB, BS, H, D)
    gen = torch.Generator().manual_seed(0)
    pool.kv.copy_(torch.randn(pool.kv.shape, generator=gen))
    return pool


def test_shape_and_sizes() -> None:
    pool = KVPool(L, NB, BS, H, D, dtype=torch.float16)
    assert tuple(pool.kv.shape) == (L, 2, NB, BS, H, D)
    assert pool.bytes_per_block == L * 2 * BS * H * D * 2
    assert pool.nbytes == pool.bytes_per_block * NB
    assert pool.keys(1).data_ptr() == pool.kv[1, 0].data_ptr()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4"])
def test_constructor_rejects_non_positive_ints(bad: object) -> None:
    with pytest.raises(InvalidConfig):
        KVPool(L, bad, BS, H, D)  # type: ignore[arg-type]


def test_write_lands_at_block_times_size_plus_offset() -> None:
    pool = make_pool()
    blocks, offsets = [5, 2, 5], [3, 0, 1]
    slots = pool.slots(blocks, offsets)
    k = torch.randn(3, H, D)
    v = torch.randn(3, H, D)
    before = pool.kv.clone()
    pool.write(1, slots, k, v)
    for i, (b, o) in enumerate(zip(blocks, offsets, strict=True)):
        assert torch.equal(pool.keys(1)[b, o], k[i])
        assert torch.equal(pool.values(1)[b, o], v[i])
    changed = (pool.kv != before).any(dim=(-1, -2))  # [L, 2, NB, BS]
    assert int(changed.sum()) == 2 * 3  # exactly three key and three value slots
    assert not changed[0].any()  # the other layer is untouched


def test_rejected_write_changes_nothing() -> None:
    pool = make_pool()
    before = pool.kv.clone()
    good = torch.randn(2, H, D)
    with pytest.raises(ShapeMismatch):
        pool.write(0, pool.slots([1, 2], [0, 0]), good, torch.randn(2, H, D + 1))
    with pytest.raises(InvalidBlock):
        pool.write(0, torch.tensor([0, NB * BS]), good, good)
    with pytest.raises(InvalidBlock):
        pool.write(0, torch.tensor([3, 3]), good, good)
    with pytest.raises(ShapeMismatch):
        pool.write(0, torch.tensor([1, 2], dtype=torch.int32), good, good)
    with pytest.raises(InvalidBlock):
        pool.write(L, pool.slots([1, 2], [0, 0]), good, good)
    with pytest.raises(InvalidBlock):
        pool.slots([NB], [0])
    with pytest.raises(InvalidBlock):
        pool.slots([0], [BS])
    assert torch.equal(pool.kv, before)


def test_copy_blocks_copies_every_layer_as_if_simultaneous() -> None:
    pool = make_pool()
    before = pool.kv.clone()
    pairs = [(1, 4), (4, 6), (2, 7)]  # 4 is both a destination and a source
    pool.copy_blocks(pairs)
    for src, dst in pairs:
        assert torch.equal(pool.kv[:, :, dst], before[:, :, src])
    untouched = [b for b in range(NB) if b not in {4, 6, 7}]
    assert torch.equal(pool.kv[:, :, untouched], before[:, :, untouched])


def test_copy_blocks_rejects_bad_pairs_without_copying() -> None:
    pool = make_pool()
    before = pool.kv.clone()
    with pytest.raises(InvalidBlock):
        pool.copy_blocks([(1, 2), (3, 2)])
    with pytest.raises(InvalidBlock):
        pool.copy_blocks([(1, 2), (3, NB)])
    assert torch.equal(pool.kv, before)
    pool.copy_blocks([])
    assert torch.equal(pool.kv, before)


def test_swap_round_trip_restores_contents_in_new_blocks() -> None:
    pool = make_pool()
    before = pool.kv.clone()
    host = pool.swap_out([3, 0, 5])
    assert host.device.type == "cpu"
    assert tuple(host.shape) == (L, 2, 3, BS, H, D)
    assert host.is_pinned() == pinning_available(pool.device)
    pool.kv.zero_()
    pool.swap_in(host, [7, 1, 2])
    for src, dst in [(3, 7), (0, 1), (5, 2)]:
        assert torch.equal(pool.kv[:, :, dst], before[:, :, src])
    assert not pool.kv[:, :, [0, 3, 4, 5, 6]].any()


def test_swap_in_rejects_mismatched_host_tensor() -> None:
    pool = make_pool()
    host = pool.swap_out([1, 2])
    before = pool.kv.clone()
    with pytest.raises(ShapeMismatch):
        pool.swap_in(host, [3])
    with pytest.raises(InvalidBlock):
        pool.swap_in(host, [3, 3])
    with pytest.raises(ShapeMismatch):
        pool.swap_in(host.double(), [3, 4])
    assert torch.equal(pool.kv, before)


def test_pinning_is_never_requested_without_cuda() -> None:
    assert pinning_available("cpu") is False
    assert pinning_available("cuda") == torch.cuda.is_available()


@pytest.mark.gpu
@needs_cuda
def test_swap_uses_pinned_memory_on_cuda() -> None:
    pool = KVPool(L, NB, BS, H, D, device="cuda")
    pool.kv.normal_()
    host = pool.swap_out([1, 2])
    assert host.is_pinned()
    pool.swap_in(host, [5, 6])
    assert torch.equal(pool.kv[:, :, [5, 6]], pool.kv[:, :, [1, 2]])
