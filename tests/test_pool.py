"""The KV block pool: slot writes, batched copy-on-write, swap, and its validation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from servelab.kv.blocks import InvalidBlock, InvalidConfig  # noqa: E402
from servelab.kv.pool import (  # noqa: E402
    KVPool,
    ShapeMismatch,
    SwapSpace,
    pinning_available,
    upload,
)
from sync_counter import SyncCounter  # noqa: E402

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
    assert tuple(host.shape) == (3, L, 2, BS, H, D)  # block-major: one block is contiguous
    assert host.is_pinned() == pinning_available(pool.device)
    pool.kv.zero_()
    pool.swap_in(host, [7, 1, 2])
    for src, dst in [(3, 7), (0, 1), (5, 2)]:
        assert torch.equal(pool.kv[:, :, dst], before[:, :, src])
    assert not pool.kv[:, :, [0, 3, 4, 5, 6]].any()


def test_swap_through_scattered_host_blocks_of_one_space() -> None:
    pool = make_pool()
    before = pool.kv.clone()
    space = SwapSpace(pool, 6)
    pool.swap_out([3, 0, 5], space, [4, 0, 1])
    pool.swap_out([6], space, [3])
    for dev, host in [(3, 4), (0, 0), (5, 1), (6, 3)]:
        assert torch.equal(space.tensor[host], before[:, :, dev])
    pool.kv.zero_()
    pool.swap_in(space, [2, 7, 1], [3, 1, 4])
    for dev, src in [(2, 6), (7, 5), (1, 3)]:
        assert torch.equal(pool.kv[:, :, dev], before[:, :, src])


class _OpLog(TorchDispatchMode):
    """Every aten op that reads or writes the storage of ``watched``."""

    def __init__(self, watched: torch.Tensor) -> None:
        super().__init__()
        self.ptr = watched.untyped_storage().data_ptr()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        flat = [*args, *(kwargs or {}).values()]
        if any(
            isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == self.ptr for a in flat
        ):
            self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_swap_copies_each_run_of_host_blocks_once_and_directly() -> None:
    """No gather into a temporary host tensor (it would be pageable: a synchronous copy),
    no second buffer: the space's own storage is touched only by slicing views and one
    ``copy_`` per run of consecutive host blocks, in both directions."""
    pool = make_pool()
    space = SwapSpace(pool, 8)
    storage = space._data.untyped_storage().data_ptr()
    runs = [5, 6, 7, 0, 2]  # three runs: 5-7, 0, 2
    with _OpLog(space._data) as log:
        pool.swap_out([1, 2, 3, 4, 6], space, runs)
    assert [op for op in log.ops if op not in VIEW_OPS] == ["copy_"] * 3
    with _OpLog(space._data) as log:
        pool.swap_in(space, [0, 1, 3, 4, 7], runs)
    assert [op for op in log.ops if op not in VIEW_OPS] == ["copy_"] * 3
    assert space._data.untyped_storage().data_ptr() == storage


VIEW_OPS = {"slice", "select", "view", "alias", "as_strided", "detach"}


class _Event:
    def __init__(self) -> None:
        self.done = False
        self.waited = 0

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.waited += 1
        self.done = True


def test_swap_space_waits_for_copies_in_flight_before_the_cpu_touches_it() -> None:
    """The ordering contract (the event is CUDA's; a stand-in plays it here): while a copy
    is in flight the space says so, and its tensor is handed out only after the wait."""
    pool = make_pool()
    space = pool.swap_out([1, 2])
    assert not space.in_flight  # nothing is asynchronous without pinned memory
    event = _Event()
    space._pending = event  # type: ignore[assignment]
    assert space.in_flight
    data = space.tensor
    assert event.waited == 1 and not space.in_flight
    assert data is space._data
    space.tensor  # noqa: B018 - nothing pending any more: no second wait
    assert event.waited == 1


def test_swaps_reject_bad_arguments_and_change_nothing() -> None:
    pool = make_pool()
    host = pool.swap_out([1, 2])
    saved = host.tensor.clone()
    before = pool.kv.clone()
    with pytest.raises(ShapeMismatch):
        pool.swap_in(host, [3])
    with pytest.raises(InvalidBlock):
        pool.swap_in(host, [3, 3])
    with pytest.raises(InvalidBlock):
        pool.swap_in(host, [3, 4], [0, 2])  # the space has host blocks 0 and 1
    with pytest.raises(InvalidBlock):
        pool.swap_out([3, 4], host, [1, 1])
    with pytest.raises(InvalidBlock):
        pool.swap_out([NB], host, [0])
    other = KVPool(L, NB, BS, H, D, dtype=torch.float64)
    with pytest.raises(ShapeMismatch):
        pool.swap_in(other.swap_out([1, 2]), [3, 4])
    with pytest.raises(ShapeMismatch):
        pool.swap_in(saved, [3, 4])  # type: ignore[arg-type]
    assert torch.equal(pool.kv, before)
    assert torch.equal(host.tensor, saved)


def test_trusted_writes_skip_the_device_reads_and_debug_pools_do_them_anyway() -> None:
    pool = make_pool()
    good = torch.randn(2, H, D)
    slots = pool.slots([1, 2], [0, 3])
    with SyncCounter() as checked:
        pool.write(0, slots, good, good)
    with SyncCounter() as trusted:
        pool.write(0, slots, good, good, validate_slots=False)
    assert checked.total == 3 and trusted.total == 0  # min, max, unique
    debug = KVPool(L, NB, BS, H, D, debug=True)
    with pytest.raises(InvalidBlock):
        debug.write(0, torch.tensor([3, 3]), good, good, validate_slots=False)
    with pytest.raises(InvalidBlock):
        pool.slots([1, 1], [2, 2])  # host-side validation also refuses a slot twice


def test_pinning_is_never_requested_without_cuda() -> None:
    assert pinning_available("cpu") is False
    assert pinning_available("cuda") == torch.cuda.is_available()
    assert upload([[1, 2], [3, 4]], "cpu").tolist() == [[1, 2], [3, 4]]


@pytest.mark.gpu
@needs_cuda
def test_swap_uses_pinned_memory_on_cuda() -> None:
    pool = KVPool(L, NB, BS, H, D, device="cuda")
    pool.kv.normal_()
    host = pool.swap_out([1, 2])
    assert host.is_pinned() and host.tensor.is_pinned()
    assert upload([1, 2], "cuda").device.type == "cuda"
    pool.swap_in(host, [5, 6])
    assert torch.equal(pool.kv[:, :, [5, 6]], pool.kv[:, :, [1, 2]])


@pytest.mark.gpu
@needs_cuda
def test_cpu_rewrite_right_after_a_swap_in_cannot_race_the_copy() -> None:
    """256 MiB in flight: zeroing the host blocks through ``tensor`` right after
    ``swap_in`` returns must not reach the device copy (it waits first)."""
    pool = KVPool(4, 64, 256, 8, 128, device="cuda")  # 64 blocks of 4 MiB
    pool.kv.normal_()
    blocks = list(range(32))
    space = pool.swap_out(blocks)
    pool.swap_in(space, list(range(32, 64)))
    assert space.pinned
    space.tensor.zero_()
    torch.cuda.synchronize()
    assert torch.equal(pool.kv[:, :, 32:], pool.kv[:, :, :32])
