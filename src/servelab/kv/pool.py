"""The KV block pool: every key and value of every sequence, in one tensor on a device.

The block manager decides *which* physical block holds a token; this module owns the
memory those ids name. One tensor of shape
``[layers, 2, num_blocks, block_size, kv_heads, head_dim]`` (index 0 of the second axis
holds keys, 1 holds values) means a block id addresses the same rows in every layer, so
one index list moves a block across the whole model:

- **slot writes** scatter new keys/values to flat slots ``block * block_size + offset``;
- **copy-on-write** copies all ``(src, dst)`` pairs of a step, in all layers, with one
  indexed copy instead of one small copy per block per layer;
- **swap** moves blocks to a :class:`SwapSpace` in host memory and back.

No host synchronisation on the hot path. On CUDA, anything that reads a device value on
the host (``int(t)``, ``t.max()`` compared in Python, ``unique``, ``nonzero``) stalls the
CPU until the GPU catches up, and so does a host-to-device copy from ordinary (pageable)
memory. So: index lists travel through :func:`upload` (pinned memory, one asynchronous
copy); :meth:`KVPool.slots` validates slot ids on the host, where they are Python ints;
and :meth:`KVPool.write` re-checks a slot *tensor* (a device read) only when asked to,
or when the pool was built with ``debug=True``.

Swap stays pinned end to end. A :class:`SwapSpace` is block-major
(``[host_blocks, layers, 2, block_size, kv_heads, head_dim]``), so every host block is
one contiguous run of bytes: a swap copies each run of consecutive host blocks with one
direct, asynchronous copy between pinned memory and the device, never through a pageable
temporary and never through a second buffer. Ordering: copies that go through the pool
are ordered on the device's current stream, so a swap-in and a later swap-out of the
same host block need no wait; the CPU, though, may only read or rewrite the bytes through
:attr:`SwapSpace.tensor`, which first waits for every copy still in flight.

On a CPU-only build pinning raises, so it is never requested there (:func:`pinning_available`).
Every method validates its arguments before touching the tensor, so a rejected call
leaves the pool exactly as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from servelab.kv.blocks import InvalidBlock, InvalidConfig, KVCacheError

__all__ = ["KVPool", "ShapeMismatch", "SwapSpace", "pinning_available", "upload"]


class ShapeMismatch(KVCacheError, ValueError):
    """A tensor handed to the pool has the wrong shape, dtype or device."""


def pinning_available(device: torch.device | str) -> bool:
    """Whether host buffers for ``device`` can be pinned (a CUDA device on a CUDA build)."""
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


def upload(
    values: Sequence[int] | Sequence[Sequence[int]],
    device: torch.device | str,
    dtype: torch.dtype = torch.int64,
) -> torch.Tensor:
    """Python ints to a tensor on ``device`` without stalling the host.

    The values are written once into pinned host memory (on CUDA) and copied with
    ``non_blocking=True``: the copy is queued behind the kernels already launched instead
    of waiting for them. PyTorch's pinned-memory allocator keeps the staging buffer alive
    until the copy has run, so nothing here needs a wait. On a CPU device the host tensor
    is the result.
    """
    pin = pinning_available(device)
    host = torch.tensor(values, dtype=dtype, pin_memory=pin)
    return host.to(device, non_blocking=pin)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidConfig(f"{name} must be a positive int, got {value!r}")
    return value


def _runs(ids: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(position, first id, length)`` of each run of consecutive ids, in order."""
    runs: list[tuple[int, int, int]] = []
    for i, h in enumerate(ids):
        if runs and runs[-1][1] + runs[-1][2] == h:
            pos, first, n = runs[-1]
            runs[-1] = (pos, first, n + 1)
        else:
            runs.append((i, h, 1))
    return runs


class KVPool:
    """The paged KV cache of one model replica on one device."""

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        debug: bool = False,
    ) -> None:
        self.num_layers = _positive_int("num_layers", num_layers)
        self.num_blocks = _positive_int("num_blocks", num_blocks)
        self.block_size = _positive_int("block_size", block_size)
        self.num_kv_heads = _positive_int("num_kv_heads", num_kv_heads)
        self.head_dim = _positive_int("head_dim", head_dim)
        self.device = torch.device(device)
        self.dtype = dtype
        self.debug = bool(debug)
        shape = (num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim)
        self.kv = torch.zeros(shape, dtype=dtype, device=self.device)

    # -- sizes ---------------------------------------------------------------------------
    @property
    def bytes_per_block(self) -> int:
        """Bytes one block occupies across all layers, keys and values."""
        return self.kv[:, :, 0].numel() * self.kv.element_size()

    @property
    def nbytes(self) -> int:
        return self.kv.numel() * self.kv.element_size()

    def keys(self, layer: int) -> torch.Tensor:
        """A view ``[num_blocks, block_size, kv_heads, head_dim]`` of one layer's keys."""
        return self.kv[self._layer(layer), 0]

    def values(self, layer: int) -> torch.Tensor:
        """A view ``[num_blocks, block_size, kv_heads, head_dim]`` of one layer's values."""
        return self.kv[self._layer(layer), 1]

    # -- slot writes ---------------------------------------------------------------------
    def slots(self, blocks: Sequence[int], offsets: Sequence[int]) -> torch.Tensor:
        """Flat slot ids ``block * block_size + offset`` as an int64 tensor on the device.

        Validated here, on the host (in range, no slot twice), so that :meth:`write` can
        trust them with ``validate_slots=False``.
        """
        if len(blocks) != len(offsets):
            raise ShapeMismatch(f"{len(blocks)} blocks but {len(offsets)} offsets")
        for b in blocks:
            self._check_block(b)
        for o in offsets:
            if isinstance(o, bool) or not isinstance(o, int) or not 0 <= o < self.block_size:
                raise InvalidBlock(f"offset {o!r} is outside range(0, {self.block_size})")
        flat = [b * self.block_size + o for b, o in zip(blocks, offsets, strict=True)]
        if len(set(flat)) != len(flat):
            raise InvalidBlock("a slot appears twice in one write")
        return upload(flat, self.device)

    def write(
        self,
        layer: int,
        slots: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        validate_slots: bool = True,
    ) -> None:
        """Store ``k``/``v`` (each ``[n, kv_heads, head_dim]``) at ``n`` flat slots of a layer.

        ``validate_slots`` checks the slot *values* (in range, none twice): three reads
        of a device tensor, each a host synchronisation on CUDA. Pass False for slots
        validated on the host (:meth:`slots`, or derived from a validated
        :class:`~servelab.kv.attention.DecodeBatch`); a pool built with ``debug=True``
        checks them anyway. Shapes, dtypes and devices are always checked (free).
        """
        layer = self._layer(layer)
        n = self._check_slots(slots, values=validate_slots or self.debug)
        want = (n, self.num_kv_heads, self.head_dim)
        for name, t in (("k", k), ("v", v)):
            if tuple(t.shape) != want:
                raise ShapeMismatch(f"{name} has shape {tuple(t.shape)}, expected {want}")
            if t.device != self.device:
                raise ShapeMismatch(f"{name} is on {t.device}, the pool on {self.device}")
        flat = self.kv[layer].view(2, -1, self.num_kv_heads, self.head_dim)
        flat[0].index_copy_(0, slots, k.to(self.dtype))
        flat[1].index_copy_(0, slots, v.to(self.dtype))

    # -- copy-on-write -------------------------------------------------------------------
    def copy_blocks(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy block ``src`` into block ``dst`` for every pair, in every layer, at once.

        Sources are read before any destination is written, so the result is as if all
        copies happened simultaneously. Destinations must be distinct.
        """
        if not pairs:
            return
        srcs = [p[0] for p in pairs]
        dsts = [p[1] for p in pairs]
        for b in (*srcs, *dsts):
            self._check_block(b)
        if len(set(dsts)) != len(dsts):
            raise InvalidBlock(f"a destination block appears twice in {list(pairs)}")
        src, dst = upload([srcs, dsts], self.device)
        self.kv[:, :, dst] = self.kv[:, :, src]

    # -- swap ----------------------------------------------------------------------------
    def swap_out(
        self,
        blocks: Sequence[int],
        space: SwapSpace | None = None,
        host_blocks: Sequence[int] | None = None,
    ) -> SwapSpace:
        """Copy device ``blocks`` into host blocks ``host_blocks`` of ``space``; returns it.

        Without ``space``, a new one of ``len(blocks)`` host blocks is made (and
        ``host_blocks`` defaults to ``0..n-1``). On CUDA the copy may still be in flight
        when this returns; the device blocks may be reused at once (later kernels queue
        behind it), and the CPU sees the bytes through :attr:`SwapSpace.tensor`, which
        waits. The device blocks are left as they are: the block manager decides when
        they may be reused.
        """
        if space is None:
            space = SwapSpace(self, max(len(blocks), 1))
        host_ids = self._check_swap(space, blocks, host_blocks)
        if len(set(host_ids)) != len(host_ids):
            raise InvalidBlock(f"a host block appears twice in {host_ids}")
        if not blocks:
            return space
        idx = upload(list(blocks), self.device)
        # one gather on the device, already block-major: [n, layers, 2, bs, heads, dim]
        staged = self.kv.permute(2, 0, 1, 3, 4, 5).index_select(0, idx)
        for pos, first, n in _runs(host_ids):
            space._data[first : first + n].copy_(staged[pos : pos + n], non_blocking=space.pinned)
        space._record(self.device)
        return space

    def swap_in(
        self,
        space: SwapSpace,
        blocks: Sequence[int],
        host_blocks: Sequence[int] | None = None,
    ) -> None:
        """Copy host blocks ``host_blocks`` (default: all of ``space``) into ``blocks``.

        On CUDA this returns while the copy may still be in flight: the CPU must not
        rewrite those host blocks except through :attr:`SwapSpace.tensor` (which waits)
        or another swap (ordered on the stream).
        """
        if host_blocks is None and isinstance(space, SwapSpace):
            host_blocks = range(space.num_blocks)
        host_ids = self._check_swap(space, blocks, host_blocks)
        if len(set(blocks)) != len(blocks):
            raise InvalidBlock(f"a destination block appears twice in {list(blocks)}")
        if not blocks:
            return
        idx = upload(list(blocks), self.device)
        staged = torch.empty(
            (len(blocks), *space._data.shape[1:]), dtype=self.dtype, device=self.device
        )
        for pos, first, n in _runs(host_ids):
            staged[pos : pos + n].copy_(space._data[first : first + n], non_blocking=space.pinned)
        self.kv.permute(2, 0, 1, 3, 4, 5).index_copy_(0, idx, staged)
        space._record(self.device)

    # -- validation ----------------------------------------------------------------------
    def _layer(self, layer: int) -> int:
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise InvalidBlock(f"layer must be an int, got {layer!r}")
        if not 0 <= layer < self.num_layers:
            raise InvalidBlock(f"layer {layer} is outside range(0, {self.num_layers})")
        return layer

    def _check_block(self, block: int) -> None:
        if isinstance(block, bool) or not isinstance(block, int):
            raise InvalidBlock(f"block id must be an int, got {block!r}")
        if not 0 <= block < self.num_blocks:
            raise InvalidBlock(f"block {block} is outside range(0, {self.num_blocks})")

    def _check_swap(
        self, space: SwapSpace, blocks: Sequence[int], host_blocks: Sequence[int] | None
    ) -> list[int]:
        if not isinstance(space, SwapSpace):
            raise ShapeMismatch(f"swap needs a SwapSpace, got {type(space).__name__}")
        if space.geometry != self._geometry():
            raise ShapeMismatch(
                f"swap space holds blocks of {space.geometry}, the pool {self._geometry()}"
            )
        for b in blocks:
            self._check_block(b)
        host_ids = list(range(len(blocks))) if host_blocks is None else list(host_blocks)
        if len(host_ids) != len(blocks):
            raise ShapeMismatch(f"{len(blocks)} device blocks but {len(host_ids)} host blocks")
        for h in host_ids:
            if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < space.num_blocks:
                raise InvalidBlock(f"host block {h!r} is outside range(0, {space.num_blocks})")
        return host_ids

    def _geometry(self) -> tuple[object, ...]:
        return (
            self.num_layers,
            self.block_size,
            self.num_kv_heads,
            self.head_dim,
            self.dtype,
            self.device,
        )

    def _check_slots(self, slots: torch.Tensor, *, values: bool) -> int:
        if slots.dim() != 1 or slots.dtype != torch.int64 or slots.device != self.device:
            raise ShapeMismatch(
                f"slots must be a 1-D int64 tensor on {self.device}, "
                f"got {tuple(slots.shape)} {slots.dtype} on {slots.device}"
            )
        n = int(slots.numel())
        if n and values:
            lo, hi = int(slots.min()), int(slots.max())
            if lo < 0 or hi >= self.num_blocks * self.block_size:
                raise InvalidBlock(
                    f"slot ids span {lo}..{hi}, outside range(0, "
                    f"{self.num_blocks * self.block_size})"
                )
            if int(torch.unique(slots).numel()) != n:
                raise InvalidBlock("a slot appears twice in one write")
        return n


class SwapSpace:
    """Host memory for KV blocks swapped out of a :class:`KVPool`.

    ``num_blocks`` host blocks, block-major (``[num_blocks, layers, 2, block_size,
    kv_heads, head_dim]``, so each block is contiguous) and pinned when the pool is on
    CUDA. The bytes are private: the pool copies into and out of them asynchronously,
    and :attr:`tensor`, the only way for the CPU to see them, first waits for every such
    copy to finish.
    """

    def __init__(self, pool: KVPool, num_blocks: int) -> None:
        self.num_blocks = _positive_int("num_blocks", num_blocks)
        self.geometry = pool._geometry()
        self.pinned = pinning_available(pool.device)
        shape = (num_blocks, pool.num_layers, 2, *pool.kv.shape[3:])
        self._data = torch.zeros(shape, dtype=pool.dtype, pin_memory=self.pinned)
        self._pending: torch.cuda.Event | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    def is_pinned(self) -> bool:
        return self.pinned

    @property
    def in_flight(self) -> bool:
        """Whether a copy into or out of this space may still be running."""
        pending = self._pending
        return pending is not None and not pending.query()  # type: ignore[no-untyped-call]

    def wait(self) -> None:
        """Block the CPU until every copy issued so far into or out of this space is done."""
        if self._pending is not None:
            self._pending.synchronize()
            self._pending = None

    @property
    def tensor(self) -> torch.Tensor:
        """The host blocks, safe to read or rewrite on the CPU (waits for copies first)."""
        self.wait()
        return self._data

    def _record(self, device: torch.device) -> None:
        """Mark the end of the copies just queued (only pinned copies run asynchronously)."""
        if self.pinned:
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record(torch.cuda.current_stream(device))
            self._pending = event
