"""Paged decode attention: one new query per sequence against keys/values in scattered blocks.

A decode step reads every cached key and value of every running sequence once, so its
speed is bounded by memory bandwidth; the question is how close a kernel gets to it while
following block tables. Four implementations, all equal to dense attention:

``dense_attention``
    The reference: contiguous keys/values, ``scaled_dot_product_attention``.
``gather`` (the oracle)
    Gather each sequence's blocks into a contiguous ``[batch, heads, max_len, dim]`` copy,
    then call SDPA with a length mask. Obviously correct, and the correctness oracle for
    the fast path, but it reads the KV cache, writes a padded copy and reads that copy
    again: at least three passes over the bytes that matter.
``flex`` (the fast path on CUDA)
    PyTorch FlexAttention driven directly by our block tables: the tables become the
    ``kv_indices`` of a ``BlockMask`` whose KV block size is the KV block size, every
    block but the last of a sequence is marked *full* (no masking inside the kernel) and
    a mask function cuts the last block at the sequence's length. Compiled with
    ``torch.compile`` it runs a fused Triton decode kernel that reads only the listed
    blocks, once.

``triton`` (selected by name only)
    The kernel learners write in notebook 08, in Triton: one program per (sequence, query
    head) walks the block table with an online softmax (:mod:`servelab.kv.triton_decode`).
    It needs the optional ``triton`` package; without a GPU it runs in Triton's interpreter,
    exact and slow. It is what lets the engine run on a learner's own kernel.

Why FlexAttention and not a hand-written Triton kernel. FlexAttention ships inside torch
(no extra ~640 MB dependency), is compiled by inductor into the same split-KV
flash-decoding kernel family that serving engines use, handles grouped-query attention
natively, and accepts any block table through ``kv_indices`` without copying the cache.
A custom kernel would have to beat it by a measured margin to be worth its maintenance.
``benchmarks/gpu.py`` measures both supplied backends against the device-to-device copy
bandwidth over a batch x context grid; the target for the fast path is 0.7 of copy
bandwidth. Run it on a GPU before changing the default. On CUDA the KV block size must be a
multiple of 16 (the kernel's tile width).

One mask per step. Every layer of a decode step attends over the same block tables, so
:class:`DecodeAttention` chooses the backend and builds the step's mask once (the length
mask of the oracle, the ``BlockMask`` of FlexAttention) and every layer reuses it. Building
it needs no host synchronisation: the block tables are uploaded from pinned memory in one
asynchronous copy (:meth:`DecodeBatch.build`) and the FlexAttention buffers are filled
with scatters, not with ``nonzero``.

Bounded compilation. The compiled kernel is specialised to the shapes it sees
(``dynamic=False``), so batches are padded to a bucket (16, 32, 64, ... rows): a serving
loop compiles at most one kernel per bucket and pool geometry. It is compiled with
``fullgraph=True``, so a graph break or a hit recompile limit raises instead of quietly
running the slow eager path; the first call of each bucket raises dynamo's recompile
limit to cover every bucket of every cached geometry.

Prefill. :func:`prefill_attention` avoids an explicit mask where it can: a fresh prompt (as many
queries as keys) uses ``is_causal=True``, which CUDA's flash kernel serves directly (with
grouped-query heads, in fp16/bf16); a suffix after a prefix-cache hit uses PyTorch's
lower-right causal bias, which also reaches flash on CUDA when flash accepts the inputs,
and otherwise an explicit boolean mask (then the efficient or math kernel).
:func:`sdpa_backend` names the kernel SDPA picks; ``benchmarks/gpu.py`` records it.

On CPU FlexAttention runs eagerly: it materializes scores against *every* slot of the pool
and applies the mask function everywhere. That is why the mask is written to be correct
at every physical position (a physical-to-logical block map, not just "cut the last
block"), why the CPU default is the gather oracle, and why ``flex`` on CPU is used only to
test that the block mask is right.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from servelab.kv.blocks import InvalidBlock, InvalidLength, KVCacheError
from servelab.kv.pool import ShapeMismatch, upload

__all__ = [
    "BACKENDS",
    "Backend",
    "DecodeAttention",
    "DecodeBatch",
    "FlexDecoder",
    "InvalidBackend",
    "dense_attention",
    "flex_attention_paged",
    "flex_decoder",
    "gather_attention",
    "gather_kv",
    "length_mask",
    "paged_decode",
    "prefill_attention",
    "sdpa_backend",
]

Backend = Literal["gather", "flex", "flex-eager", "triton"]
BACKENDS: tuple[Backend, ...] = ("gather", "flex", "flex-eager", "triton")

# FlexAttention's decode kernel needs the query tile to be a multiple of its BLOCK_M;
# a query of length 1 fits in one row tile whatever its size.
_Q_TILE = 128
_MIN_BUCKET = 16
_MAX_BUCKETS = 8  # 16 .. 2048 rows


class InvalidBackend(KVCacheError, ValueError):
    """An attention backend name that does not exist or cannot run on this device."""


@dataclass(frozen=True)
class DecodeBatch:
    """The block tables and lengths of one decode step, as device tensors.

    Built once per step and shared by every layer: ``tables`` is ``[batch, max_blocks]``
    int64 padded with block 0 (never read past ``lens``), ``lens`` is ``[batch]`` int64,
    and ``tokens`` (when built with them) the newest token of each row, the model's input.
    """

    tables: torch.Tensor
    lens: torch.Tensor
    block_size: int
    num_blocks: int
    max_len: int
    tokens: torch.Tensor | None = None

    @classmethod
    def build(
        cls,
        tables: Sequence[Sequence[int]],
        lens: Sequence[int],
        *,
        block_size: int,
        num_blocks: int,
        device: torch.device | str = "cpu",
        tokens: Sequence[int] | None = None,
    ) -> DecodeBatch:
        """Validate python block tables and lengths and move them to ``device``.

        Everything is checked here, on the host, so no kernel of the step has to check
        device values; tables, lengths and tokens travel in one asynchronous copy from
        pinned memory (:func:`~servelab.kv.pool.upload`).
        """
        if len(tables) != len(lens) or not tables:
            raise InvalidLength(f"need one length per table, got {len(tables)} and {len(lens)}")
        if tokens is not None and len(tokens) != len(lens):
            raise InvalidLength(f"need one token per table, got {len(tokens)} and {len(lens)}")
        for t, n in zip(tables, lens, strict=True):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InvalidLength(f"a sequence length must be an int >= 1, got {n!r}")
            if len(t) != -(-n // block_size):
                raise InvalidLength(
                    f"a table of {len(t)} blocks cannot hold exactly {n} tokens "
                    f"in blocks of {block_size}"
                )
            for b in t:
                if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < num_blocks:
                    raise InvalidBlock(f"block {b!r} is outside range(0, {num_blocks})")
            if len(set(t)) != len(t):
                raise InvalidBlock(f"a block appears twice in the table {list(t)}")
        width = max(len(t) for t in tables)
        extra = [list(lens)] if tokens is None else [list(lens), list(tokens)]
        rows = [
            [*t, *([0] * (width - len(t))), *col] for t, *col in zip(tables, *extra, strict=True)
        ]
        packed = upload(rows, device)
        return cls(
            tables=packed[:, :width],
            lens=packed[:, width],
            block_size=block_size,
            num_blocks=num_blocks,
            max_len=max(lens),
            tokens=None if tokens is None else packed[:, width + 1],
        )

    @property
    def batch(self) -> int:
        return int(self.lens.numel())

    def last_slots(self) -> torch.Tensor:
        """Flat pool slot of each row's newest token (position ``lens - 1``), on the device."""
        last = self.lens - 1
        block = self.tables.gather(1, (last // self.block_size)[:, None])[:, 0]
        return block * self.block_size + last % self.block_size


def _scale(head_dim: int, scale: float | None) -> float:
    return 1.0 / math.sqrt(head_dim) if scale is None else scale


def dense_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """SDPA on contiguous ``q [B, Hq, Lq, D]``, ``k/v [B, Hkv, Lk, D]`` (the reference)."""
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, scale=_scale(q.shape[-1], scale), enable_gqa=True
    )


def gather_kv(cache: torch.Tensor, tables: torch.Tensor, length: int) -> torch.Tensor:
    """Copy blocks ``tables [B, nb]`` of ``cache [blocks, bs, H, D]`` to ``[B, H, length, D]``."""
    b, nb = tables.shape
    bs, h, d = cache.shape[1:]
    flat = cache[tables].reshape(b, nb * bs, h, d)[:, :length]
    return flat.transpose(1, 2)


def length_mask(batch: DecodeBatch) -> torch.Tensor:
    """``[B, 1, 1, max_len]``: True where a gathered position holds one of the row's tokens."""
    pos = torch.arange(batch.max_len, device=batch.lens.device)
    return (pos[None, :] < batch.lens[:, None])[:, None, None, :]


def gather_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    batch: DecodeBatch,
    *,
    scale: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The oracle: gather through the block tables, then SDPA. ``q`` is ``[B, Hq, D]``.

    ``mask`` is :func:`length_mask` of ``batch`` (built here when not given).
    """
    k = gather_kv(k_cache, batch.tables, batch.max_len)
    v = gather_kv(v_cache, batch.tables, batch.max_len)
    if mask is None:
        mask = length_mask(batch)
    out = F.scaled_dot_product_attention(
        q[:, :, None, :], k, v, attn_mask=mask, scale=_scale(q.shape[-1], scale), enable_gqa=True
    )
    return out[:, :, 0, :]


def _bucket(batch: int, min_bucket: int) -> int:
    """Rows to run: ``batch`` itself when ``min_bucket`` is 0, else a power-of-two multiple of
    ``min_bucket``, so a serving loop whose batch changes every step compiles a handful of
    kernels instead of one per batch size."""
    if min_bucket <= 0:
        return batch
    size = min_bucket
    while size < batch:
        size *= 2
    if size > min_bucket << (_MAX_BUCKETS - 1):
        raise InvalidBackend(
            f"a batch of {batch} rows is past the largest compiled bucket "
            f"({min_bucket << (_MAX_BUCKETS - 1)} rows)"
        )
    return size


class FlexDecoder:
    """FlexAttention paged decode over one pool geometry, with persistent block-mask buffers.

    The block mask of a step is written *in place* into tensors allocated once per batch
    bucket, and the mask function closes over those same tensors. A compiled kernel is
    therefore reused step after step (new tensor objects or a new closure would make
    ``torch.compile`` guard-fail and recompile). Padding rows attend to one slot of block 0
    and their outputs are dropped. ``compile_backend`` is ``torch.compile``'s backend:
    ``"inductor"`` (the fused kernel) in service, a cheaper one in tests of the guards.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        device: torch.device,
        *,
        compiled: bool,
        min_bucket: int | None = None,
        compile_backend: str = "inductor",
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.device = device
        self.compiled = compiled
        self.compile_backend = compile_backend
        self.min_bucket = (_MIN_BUCKET if compiled else 0) if min_bucket is None else min_bucket
        self._states: dict[int, tuple[dict[str, torch.Tensor], object]] = {}
        self._warm: set[int] = set()  # buckets whose kernel has been compiled

    def _state(self, rows: int) -> tuple[dict[str, torch.Tensor], object]:
        if rows in self._states:
            return self._states[rows]
        from torch.nn.attention.flex_attention import BlockMask

        nb, bs, dev = self.num_blocks, self.block_size, self.device
        t = {
            # physical block -> logical index in each row's table; -1 where not owned.
            # Column nb is a sink for the padding entries of the tables (never read).
            "logical": torch.full((rows, nb + 1), -1, dtype=torch.int32, device=dev),
            "lens": torch.ones(rows, dtype=torch.int64, device=dev),
            "full_num": torch.zeros((rows, 1, 1), dtype=torch.int32, device=dev),
            "full_idx": torch.zeros((rows, 1, 1, nb), dtype=torch.int32, device=dev),
            "part_num": torch.ones((rows, 1, 1), dtype=torch.int32, device=dev),
            "part_idx": torch.zeros((rows, 1, 1, nb), dtype=torch.int32, device=dev),
        }
        logical, lens = t["logical"], t["lens"]

        def mask_mod(
            b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
        ) -> torch.Tensor:
            # correct at every physical slot: eager mode evaluates it over the whole pool
            lb = logical[b, kv_idx // bs]
            return (lb >= 0) & (lb * bs + kv_idx % bs < lens[b])

        # every block but a sequence's last is *full*: the kernel skips the mask there
        mask = BlockMask.from_kv_blocks(
            t["part_num"],
            t["part_idx"],
            t["full_num"],
            t["full_idx"],
            BLOCK_SIZE=(_Q_TILE, bs),
            mask_mod=mask_mod,
            seq_lengths=(1, nb * bs),
            compute_q_blocks=False,
        )
        self._states[rows] = (t, mask)
        return t, mask

    def prepare(self, batch: DecodeBatch) -> object:
        """Write ``batch`` into its bucket's buffers; returns the (reused) BlockMask.

        Only fixed-shape device ops (fills, a scatter, a gather): no host synchronisation.
        """
        b, width = batch.tables.shape
        t, mask = self._state(_bucket(b, self.min_bucket))
        n_blocks = (batch.lens + self.block_size - 1) // self.block_size  # [B]
        js = torch.arange(width, device=self.device)
        valid = js[None, :] < n_blocks[:, None]
        target = torch.where(valid, batch.tables, self.num_blocks)  # padding -> sink column
        logical = t["logical"]
        logical.fill_(-1)
        logical[:b].scatter_(1, target, js.to(torch.int32).expand(b, width))
        logical[b:, 0].zero_()  # padding rows own block 0 ...
        t["lens"].fill_(1)  # ... and read one slot of it
        t["lens"][:b] = batch.lens
        t["full_num"].zero_()
        t["full_num"][:b, 0, 0] = (n_blocks - 1).to(torch.int32)
        t["full_idx"][:b, 0, 0, :width] = batch.tables.to(torch.int32)
        t["part_idx"][:, 0, 0, 0].zero_()
        t["part_idx"][:b, 0, 0, 0] = batch.tables.gather(1, (n_blocks - 1)[:, None])[:, 0].to(
            torch.int32
        )
        return mask

    def __call__(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        batch: DecodeBatch,
        *,
        scale: float | None = None,
        block_mask: object | None = None,
    ) -> torch.Tensor:
        """``q [B, Hq, D]`` against one layer of the pool; returns ``[B, Hq, D]``.

        Pass the ``block_mask`` returned by :meth:`prepare` to skip rebuilding it (every
        layer of a step shares it).
        """
        mask = block_mask if block_mask is not None else self.prepare(batch)
        b = q.shape[0]
        rows = _bucket(b, self.min_bucket)
        if rows != b:
            q = torch.cat([q, q.new_zeros((rows - b, *q.shape[1:]))])
        nb, bs, hkv, d = k_cache.shape
        # [blocks, bs, H, D] -> [1, H, blocks * bs, D]: a view, nothing is copied
        k = k_cache.reshape(1, nb * bs, hkv, d).transpose(1, 2)
        v = v_cache.reshape(1, nb * bs, hkv, d).transpose(1, 2)
        fn = _flex_fn(self.compiled, self.compile_backend)
        args = (q[:, :, None, :], k, v)
        kwargs = {"block_mask": mask, "scale": _scale(d, scale), "enable_gqa": True}
        if self.compiled and rows not in self._warm:
            # the first call of a bucket compiles: allow one kernel per bucket per cached
            # geometry (later calls hit the cache and skip this ~50 us config patch)
            import torch._dynamo.config as dynamo_config

            limit = max(dynamo_config.recompile_limit, _MAX_DECODERS * _MAX_BUCKETS)
            with dynamo_config.patch(recompile_limit=limit):
                out = fn(*args, **kwargs)
            self._warm.add(rows)
        else:
            out = fn(*args, **kwargs)
        return out[:b, :, 0, :]


_COMPILED: dict[str, Callable[..., torch.Tensor]] = {}
_DECODERS: dict[tuple[int, int, str, bool], FlexDecoder] = {}
_MAX_DECODERS = 8


def _flex_fn(compiled: bool, backend: str = "inductor") -> Callable[..., torch.Tensor]:
    from torch.nn.attention.flex_attention import flex_attention

    if not compiled:
        return flex_attention
    if backend not in _COMPILED:
        # fullgraph: a graph break or a hit recompile limit raises instead of running eagerly
        _COMPILED[backend] = torch.compile(
            flex_attention, dynamic=False, fullgraph=True, backend=backend
        )
    return _COMPILED[backend]


def flex_decoder(
    num_blocks: int, block_size: int, device: torch.device, *, compiled: bool
) -> FlexDecoder:
    """The shared :class:`FlexDecoder` of a pool geometry (a few are kept, newest last)."""
    key = (num_blocks, block_size, str(device), compiled)
    decoder = _DECODERS.pop(key, None)
    if decoder is None:
        decoder = FlexDecoder(num_blocks, block_size, device, compiled=compiled)
    _DECODERS[key] = decoder
    while len(_DECODERS) > _MAX_DECODERS:
        del _DECODERS[next(iter(_DECODERS))]
    return decoder


class DecodeAttention:
    """The attention of one decode step, shared by every layer of the model.

    The backend is chosen and the step's mask is built once, here, instead of once per
    layer: the oracle's length mask, or FlexAttention's ``BlockMask`` (one
    :meth:`FlexDecoder.prepare`). Backends: ``gather`` (the oracle, default off CUDA),
    ``flex`` (compiled on CUDA, the default there; eager elsewhere), ``flex-eager`` and
    ``triton`` (notebook 08's kernel; never a default: it needs the optional triton package).
    """

    def __init__(
        self,
        batch: DecodeBatch,
        *,
        backend: Backend | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        dev = batch.lens.device if device is None else torch.device(device)
        if backend is None:
            backend = "flex" if dev.type == "cuda" else "gather"
        if backend not in BACKENDS:
            raise InvalidBackend(f"unknown attention backend {backend!r}; choose one of {BACKENDS}")
        self.batch = batch
        self.backend: Backend = backend
        self._length_mask: torch.Tensor | None = None
        self._decoder: FlexDecoder | None = None
        self._block_mask: object = None
        if backend == "gather":
            self._length_mask = length_mask(batch)
        elif backend != "triton":
            compiled = backend == "flex" and dev.type == "cuda"
            self._decoder = _flex_decoder_for(batch, dev, compiled=compiled)
            self._block_mask = self._decoder.prepare(batch)

    def __call__(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        *,
        scale: float | None = None,
    ) -> torch.Tensor:
        """``q [B, Hq, D]`` against one layer's ``[num_blocks, block_size, Hkv, D]`` caches."""
        _check_shapes(q, k_cache, v_cache, self.batch)
        if self.backend == "triton":
            from servelab.kv.triton_decode import triton_decode, unavailable

            reason = unavailable(q)
            if reason is not None:
                raise InvalidBackend(reason)
            return triton_decode(q, k_cache, v_cache, self.batch, scale=scale)
        if self._decoder is not None:
            return self._decoder(
                q, k_cache, v_cache, self.batch, scale=scale, block_mask=self._block_mask
            )
        return gather_attention(
            q, k_cache, v_cache, self.batch, scale=scale, mask=self._length_mask
        )


def _flex_decoder_for(batch: DecodeBatch, device: torch.device, *, compiled: bool) -> FlexDecoder:
    if device.type == "cuda" and batch.block_size % 16:
        raise InvalidBackend(
            f"flex on CUDA needs a block size that is a multiple of 16, got {batch.block_size}"
        )
    return flex_decoder(batch.num_blocks, batch.block_size, device, compiled=compiled)


def flex_attention_paged(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    batch: DecodeBatch,
    *,
    scale: float | None = None,
    compiled: bool | None = None,
) -> torch.Tensor:
    """FlexAttention over the pool itself, steered by the block tables. ``q`` is ``[B, Hq, D]``.

    ``compiled`` defaults to True on CUDA (the fused kernel) and False elsewhere (eager,
    which is slow and memory-hungry: it scores every slot of the pool).
    """
    if compiled is None:
        compiled = q.device.type == "cuda"
    _check_shapes(q, k_cache, v_cache, batch)
    decoder = _flex_decoder_for(batch, q.device, compiled=compiled)
    return decoder(q, k_cache, v_cache, batch, scale=scale)


def paged_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    batch: DecodeBatch,
    *,
    backend: Backend | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """Decode attention of one layer with the chosen backend (default: ``flex`` on CUDA,
    ``gather`` elsewhere); a model with several layers builds one :class:`DecodeAttention`
    per step instead, so the mask is built once.

    ``q`` is ``[B, Hq, D]``; ``k_cache``/``v_cache`` are one layer of the pool,
    ``[num_blocks, block_size, Hkv, D]``; returns ``[B, Hq, D]``.
    """
    return DecodeAttention(batch, backend=backend, device=q.device)(
        q, k_cache, v_cache, scale=scale
    )


def prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of the last ``Lq`` positions of a sequence over all ``Lk`` of them.

    ``q`` is ``[1, Hq, Lq, D]``, ``k``/``v`` ``[1, Hkv, Lk, D]`` with ``Lq <= Lk``.
    Written so SDPA can pick a fused kernel: no explicit mask for a fresh prompt, the
    lower-right causal bias for a suffix when flash takes it (see :func:`sdpa_backend`).
    """
    lq, lk = q.shape[2], k.shape[2]
    if lq == lk:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    if _lower_right_on_flash(q, k, v):
        from torch.nn.attention.bias import causal_lower_right

        bias = causal_lower_right(lq, lk)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=True)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=_suffix_mask(lq, lk, q.device), enable_gqa=True
    )


def _suffix_mask(lq: int, lk: int, device: torch.device) -> torch.Tensor:
    pos = torch.arange(lk - lq, lk, device=device)
    return pos[:, None] >= torch.arange(lk, device=device)[None, :]


def _lower_right_on_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether PyTorch's lower-right causal bias would run on CUDA's flash kernel (it
    takes grouped-query heads; its memory-efficient fallback does not everywhere)."""
    if q.device.type != "cuda":
        return False
    from torch.backends.cuda import SDPAParams, can_use_flash_attention

    try:
        params = SDPAParams(q, k, v, None, 0.0, False, True)
    except TypeError:  # a torch whose SDPAParams has no enable_gqa: use the plain mask
        return False
    return bool(can_use_flash_attention(params))


_SDPA_NAMES = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """The SDPA kernel :func:`prefill_attention` runs for these shapes, dtypes and device:
    ``flash``, ``efficient``, ``cudnn``, ``math`` (on CPU, ``flash`` is its CPU kernel)."""
    lq, lk = q.shape[2], k.shape[2]
    if lq != lk and _lower_right_on_flash(q, k, v):
        return "flash"
    choose = getattr(torch, "_fused_sdp_choice", None)  # private: may move between releases
    if choose is None:
        return "unknown"
    if lq == lk:
        choice = choose(q, k, v, is_causal=True, enable_gqa=True)
    else:
        choice = choose(q, k, v, attn_mask=_suffix_mask(lq, lk, q.device), enable_gqa=True)
    return _SDPA_NAMES.get(int(choice), str(choice))


def _check_shapes(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, batch: DecodeBatch
) -> None:
    if q.dim() != 3 or q.shape[0] != batch.batch:
        raise ShapeMismatch(f"q must be [batch={batch.batch}, heads, dim], got {tuple(q.shape)}")
    if k_cache.shape != v_cache.shape or k_cache.dim() != 4:
        raise ShapeMismatch(
            f"k/v caches must both be [blocks, block_size, heads, dim], "
            f"got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}"
        )
    if k_cache.shape[0] != batch.num_blocks or k_cache.shape[1] != batch.block_size:
        raise ShapeMismatch(
            f"cache has {k_cache.shape[0]} blocks of {k_cache.shape[1]}, the batch was built "
            f"for {batch.num_blocks} blocks of {batch.block_size}"
        )
    if q.shape[1] % k_cache.shape[2] or q.shape[2] != k_cache.shape[3]:
        raise ShapeMismatch(
            f"{q.shape[1]} query heads of dim {q.shape[2]} do not group over "
            f"{k_cache.shape[2]} kv heads of dim {k_cache.shape[3]}"
        )
