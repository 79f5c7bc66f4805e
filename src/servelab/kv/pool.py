"""The KV block pool: every key and value of every sequence, in one tensor on a device.

The block manager decides *which* physical block holds a token; this module owns the
memory those ids name. One tensor of shape
``[layers, 2, num_blocks, block_size, kv_heads, head_dim]`` (index 0 of the second axis
holds keys, 1 holds values) means a block id addresses the same rows in every layer, so
one index list moves a block across the whole model:

- **slot writes** scatter new keys/values to flat slots ``block * block_size + offset``;
- **copy-on-write** copies all ``(src, dst)`` pairs of a step, in all layers, with one
  indexed copy instead of one small copy per block per layer;
- **swap** moves blocks to host memory and back. Host buffers are pinned when the pool
  lives on CUDA (pinned memory is what lets the copy run at full PCIe speed); on a
  CPU-only build pinning raises, so it is never requested there.

Every method validates its arguments before touching the tensor, so a rejected call
leaves the pool exactly as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from servelab.kv.blocks import InvalidBlock, InvalidConfig, KVCacheError

__all__ = ["KVPool", "ShapeMismatch", "pinning_available"]


class ShapeMismatch(KVCacheError, ValueError):
    """A tensor handed to the pool has the wrong shape, dtype or device."""


def pinning_available(device: torch.device | str) -> bool:
    """Whether host buffers for ``device`` can be pinned (a CUDA device on a CUDA build)."""
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidConfig(f"{name} must be a positive int, got {value!r}")
    return value


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
    ) -> None:
        self.num_layers = _positive_int("num_layers", num_layers)
        self.num_blocks = _positive_int("num_blocks", num_blocks)
        self.block_size = _positive_int("block_size", block_size)
        self.num_kv_heads = _positive_int("num_kv_heads", num_kv_heads)
        self.head_dim = _positive_int("head_dim", head_dim)
        self.device = torch.device(device)
        self.dtype = dtype
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
        """Flat slot ids ``block * block_size + offset`` as an int64 tensor on the device."""
        if len(blocks) != len(offsets):
            raise ShapeMismatch(f"{len(blocks)} blocks but {len(offsets)} offsets")
        for b in blocks:
            self._check_block(b)
        for o in offsets:
            if isinstance(o, bool) or not isinstance(o, int) or not 0 <= o < self.block_size:
                raise InvalidBlock(f"offset {o!r} is outside range(0, {self.block_size})")
        flat = [b * self.block_size + o for b, o in zip(blocks, offsets, strict=True)]
        return torch.tensor(flat, dtype=torch.int64, device=self.device)

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k``/``v`` (each ``[n, kv_heads, head_dim]``) at ``n`` flat slots of a layer."""
        layer = self._layer(layer)
        n = self._check_slots(slots)
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
        src = torch.tensor(srcs, dtype=torch.int64, device=self.device)
        dst = torch.tensor(dsts, dtype=torch.int64, device=self.device)
        self.kv[:, :, dst] = self.kv[:, :, src]

    # -- swap ----------------------------------------------------------------------------
    def swap_out(self, blocks: Sequence[int]) -> torch.Tensor:
        """Copy ``blocks`` to a host tensor ``[layers, 2, n, block_size, heads, dim]``.

        The host buffer is pinned when the pool is on CUDA. The device blocks are left
        as they are: the block manager decides when they may be reused.
        """
        for b in blocks:
            self._check_block(b)
        idx = torch.tensor(list(blocks), dtype=torch.int64, device=self.device)
        pin = pinning_available(self.device)
        shape = (self.num_layers, 2, len(blocks), *self.kv.shape[3:])
        host = torch.empty(shape, dtype=self.dtype, device="cpu", pin_memory=pin)
        host.copy_(self.kv.index_select(2, idx), non_blocking=pin)
        if pin:
            torch.cuda.current_stream(self.device).synchronize()
        return host

    def swap_in(self, host: torch.Tensor, blocks: Sequence[int]) -> None:
        """Copy a host tensor made by :meth:`swap_out` into ``blocks`` (same count)."""
        for b in blocks:
            self._check_block(b)
        if len(set(blocks)) != len(blocks):
            raise InvalidBlock(f"a destination block appears twice in {list(blocks)}")
        want = (self.num_layers, 2, len(blocks), *self.kv.shape[3:])
        if tuple(host.shape) != want or host.dtype != self.dtype:
            raise ShapeMismatch(
                f"host tensor is {tuple(host.shape)} {host.dtype}, expected {want} {self.dtype}"
            )
        if not blocks:
            return
        idx = torch.tensor(list(blocks), dtype=torch.int64, device=self.device)
        dev = host.to(self.device, non_blocking=host.is_pinned())
        self.kv.index_copy_(2, idx, dev)

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

    def _check_slots(self, slots: torch.Tensor) -> int:
        if slots.dim() != 1 or slots.dtype != torch.int64 or slots.device != self.device:
            raise ShapeMismatch(
                f"slots must be a 1-D int64 tensor on {self.device}, "
                f"got {tuple(slots.shape)} {slots.dtype} on {slots.device}"
            )
        n = int(slots.numel())
        if n:
            lo, hi = int(slots.min()), int(slots.max())
            if lo < 0 or hi >= self.num_blocks * self.block_size:
                raise InvalidBlock(
                    f"slot ids span {lo}..{hi}, outside range(0, "
                    f"{self.num_blocks * self.block_size})"
                )
            if int(torch.unique(slots).numel()) != n:
                raise InvalidBlock("a slot appears twice in one write")
        return n
