"""A tiny, deterministic Llama-style transformer: something real to serve, with no downloads.

It has the parts that shape a KV cache: rotary position embeddings (keys are cached
*after* rotation, so a cached key never changes), RMSNorm, grouped-query attention (fewer
key/value heads than query heads: the cache holds ``n_kv_heads``), and a SwiGLU MLP.
Weights come from a seeded generator on the CPU and are then moved, so the same seed
gives the same model on every device.

Three ways to run it, which must agree token for token in fp32:

- :meth:`TinyLlama.forward` — the whole sequence, no cache (the plain reference);
- :class:`DenseKVCache` + :meth:`TinyLlama.generate_dense` — a contiguous ``max_len``
  reservation per sequence, the way engines worked before paging;
- :meth:`TinyLlama.prefill` / :meth:`TinyLlama.decode` — keys and values in a
  :class:`~servelab.kv.pool.KVPool`, addressed through block tables (what the engine uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from servelab.kv.attention import (
    Backend,
    DecodeAttention,
    DecodeBatch,
    dense_attention,
    gather_kv,
    prefill_attention,
)
from servelab.kv.blocks import InvalidBlock, InvalidConfig, InvalidLength
from servelab.kv.pool import KVPool, ShapeMismatch, upload

__all__ = [
    "BF16_TIE_RTOL",
    "DenseKVCache",
    "GreedyComparison",
    "ModelConfig",
    "TinyLlama",
    "compare_greedy",
]

# Two greedy runs in bf16 may pick different tokens where the top logits are within
# rounding of each other. bf16 keeps 8 significant bits (a relative step of 1/256); the
# paged and dense paths round differently, a few steps apart, so a gap below 1/64 of the
# largest logit (4 steps) is a tie, not a bug. Measured on CPU: the demo model's paged logits
# (eager flex) and its no-cache logits differ by 0.0625 (one step) at logits of about 10,
# against a tolerance of 0.16.
BF16_TIE_RTOL = 1 / 64


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the tiny model. The defaults make a ~0.1 M-parameter model."""

    vocab_size: int = 256
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 128
    max_seq_len: int = 1024
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    logit_scale: float = 4.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "ffn_dim",
            "max_seq_len",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidConfig(f"{name} must be a positive int, got {value!r}")
        if self.dim % self.n_heads or self.n_heads % self.n_kv_heads:
            raise InvalidConfig(
                f"dim {self.dim} must split into {self.n_heads} heads, and the heads into "
                f"{self.n_kv_heads} kv-head groups"
            )
        if (self.dim // self.n_heads) % 2:
            raise InvalidConfig("head_dim must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def kv_bytes_per_token(self, element_size: int = 4) -> int:
        """Bytes of keys and values one token occupies across all layers."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * element_size


class TinyLlama(nn.Module):
    """The model. Weights are plain parameters so ``state_dict`` round-trips via safetensors."""

    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(
        self,
        config: ModelConfig | None = None,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        cfg = config or ModelConfig()
        self.config = cfg
        gen = torch.Generator().manual_seed(cfg.seed)
        hd = cfg.head_dim

        def weight(*shape: int, fan_in: int) -> nn.Parameter:
            w = torch.randn(*shape, generator=gen) / fan_in**0.5
            return nn.Parameter(w.to(device=device, dtype=dtype), requires_grad=False)

        def ones(n: int) -> nn.Parameter:
            return nn.Parameter(torch.ones(n, device=device, dtype=dtype), requires_grad=False)

        self.embed = weight(cfg.vocab_size, cfg.dim, fan_in=1)
        self.wq = nn.ParameterList()
        self.wk = nn.ParameterList()
        self.wv = nn.ParameterList()
        self.wo = nn.ParameterList()
        self.w_gate = nn.ParameterList()
        self.w_up = nn.ParameterList()
        self.w_down = nn.ParameterList()
        self.attn_norm = nn.ParameterList()
        self.mlp_norm = nn.ParameterList()
        for _ in range(cfg.n_layers):
            self.wq.append(weight(cfg.n_heads * hd, cfg.dim, fan_in=cfg.dim))
            self.wk.append(weight(cfg.n_kv_heads * hd, cfg.dim, fan_in=cfg.dim))
            self.wv.append(weight(cfg.n_kv_heads * hd, cfg.dim, fan_in=cfg.dim))
            self.wo.append(weight(cfg.dim, cfg.n_heads * hd, fan_in=cfg.dim))
            self.w_gate.append(weight(cfg.ffn_dim, cfg.dim, fan_in=cfg.dim))
            self.w_up.append(weight(cfg.ffn_dim, cfg.dim, fan_in=cfg.dim))
            self.w_down.append(weight(cfg.dim, cfg.ffn_dim, fan_in=cfg.ffn_dim))
            self.attn_norm.append(ones(cfg.dim))
            self.mlp_norm.append(ones(cfg.dim))
        self.final_norm = ones(cfg.dim)
        # A trained model is confident: scaled-up output weights give peaked logits, so a
        # wrong key or value anywhere changes which token wins (tests rely on that).
        self.lm_head = weight(cfg.vocab_size, cfg.dim, fan_in=cfg.dim)
        self.lm_head.mul_(cfg.logit_scale)

        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        angles = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float64), inv_freq)
        self.register_buffer("rope_cos", angles.cos().to(device=device, dtype=dtype), False)
        self.register_buffer("rope_sin", angles.sin().to(device=device, dtype=dtype), False)

    # -- properties ------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.embed.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.dtype

    def new_pool(self, num_blocks: int, block_size: int) -> KVPool:
        """A KV pool shaped for this model, on its device and dtype."""
        cfg = self.config
        return KVPool(
            cfg.n_layers,
            num_blocks,
            block_size,
            cfg.n_kv_heads,
            cfg.head_dim,
            dtype=self.dtype,
            device=self.device,
        )

    # -- building blocks -----------------------------------------------------------------
    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.config.norm_eps)
        return x * rms * w

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Rotate ``x [n, heads, head_dim]`` by positions ``pos [n]`` (rotate-half form)."""
        cos = self.rope_cos[pos][:, None, :]
        sin = self.rope_sin[pos][:, None, :]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def _qkv(
        self, layer: int, x: torch.Tensor, pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        cfg, n = self.config, x.shape[0]
        h = self._norm(x, self.attn_norm[layer])
        q = F.linear(h, self.wq[layer]).view(n, cfg.n_heads, cfg.head_dim)
        k = F.linear(h, self.wk[layer]).view(n, cfg.n_kv_heads, cfg.head_dim)
        v = F.linear(h, self.wv[layer]).view(n, cfg.n_kv_heads, cfg.head_dim)
        return self._rope(q, pos), self._rope(k, pos), v

    def _finish_layer(self, layer: int, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        x = x + F.linear(attn.reshape(x.shape[0], -1), self.wo[layer])
        h = self._norm(x, self.mlp_norm[layer])
        mlp = F.silu(F.linear(h, self.w_gate[layer])) * F.linear(h, self.w_up[layer])
        return x + F.linear(mlp, self.w_down[layer])

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self._norm(x, self.final_norm), self.lm_head)

    def _check_tokens(self, tokens: Sequence[int]) -> None:
        vocab = self.config.vocab_size
        for t in tokens:
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab:
                raise InvalidLength(f"token {t!r} is outside the vocabulary range(0, {vocab})")

    def _tokens(self, tokens: Sequence[int]) -> torch.Tensor:
        self._check_tokens(tokens)
        return upload(list(tokens), self.device)

    def _check_len(self, n: int) -> None:
        if n > self.config.max_seq_len:
            raise InvalidLength(
                f"{n} tokens exceed max_seq_len={self.config.max_seq_len}; "
                "build the model with a larger ModelConfig.max_seq_len"
            )

    # -- the plain reference ---------------------------------------------------------------
    @torch.no_grad()
    def forward(self, tokens: Sequence[int]) -> torch.Tensor:
        """Logits ``[len, vocab]`` for every position of one sequence, with no cache."""
        if not tokens:
            raise InvalidLength("need at least one token")
        self._check_len(len(tokens))
        ids = self._tokens(tokens)
        pos = torch.arange(len(tokens), device=self.device)
        x = self.embed[ids]
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, pos)
            attn = dense_attention(
                q.transpose(0, 1)[None],
                k.transpose(0, 1)[None],
                v.transpose(0, 1)[None],
                causal=True,
            )[0].transpose(0, 1)
            x = self._finish_layer(layer, x, attn)
        return self._logits(x)

    # -- paged: prefill and decode against a KVPool -----------------------------------------
    @torch.no_grad()
    def prefill(
        self, pool: KVPool, tokens: Sequence[int], table: Sequence[int], *, start: int = 0
    ) -> torch.Tensor:
        """Compute positions ``start..len-1`` of one sequence; return the last logits ``[vocab]``.

        Keys/values of positions ``< start`` must already be in ``pool`` (a prefix-cache
        hit); those of the new positions are written to the blocks of ``table``. Inputs
        are validated on the host and uploaded in one copy; attention goes through
        :func:`~servelab.kv.attention.prefill_attention` (no explicit mask where it can
        avoid one, so a fused kernel can take it).
        """
        n = len(tokens)
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < n:
            raise InvalidLength(f"start must be in range(0, {n}) so one token is computed")
        self._check_len(n)
        bs = pool.block_size
        if len(table) != -(-n // bs):
            raise InvalidLength(f"a table of {len(table)} blocks cannot hold {n} tokens")
        self._check_pool(pool)
        for b in table:
            pool._check_block(b)
        if len(set(table)) != len(table):
            raise InvalidBlock(f"a block appears twice in the table {list(table)}")
        self._check_tokens(tokens[start:])
        new = n - start
        packed = upload([*tokens[start:], *table], self.device)
        ids, tab = packed[:new], packed[new:]
        pos = torch.arange(start, n, device=self.device)
        slots = tab[pos // bs] * bs + pos % bs  # distinct: distinct blocks, distinct positions
        x = self.embed[ids]
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, pos)
            pool.write(layer, slots, k, v, validate_slots=False)
            if start:  # the prefix lives in the pool: read the whole sequence back
                keys = gather_kv(pool.keys(layer), tab[None], n)
                values = gather_kv(pool.values(layer), tab[None], n)
            else:  # a fresh prompt: its keys and values are the ones just computed
                keys, values = k.transpose(0, 1)[None], v.transpose(0, 1)[None]
            attn = prefill_attention(q.transpose(0, 1)[None], keys, values)[0].transpose(0, 1)
            x = self._finish_layer(layer, x, attn)
        return self._logits(x[-1])

    @torch.no_grad()
    def decode(
        self,
        pool: KVPool,
        tokens: Sequence[int],
        tables: Sequence[Sequence[int]],
        lens: Sequence[int],
        *,
        backend: Backend | None = None,
    ) -> torch.Tensor:
        """One decode step for a batch: logits ``[batch, vocab]``.

        ``tokens[i]`` is sequence ``i``'s newest token, at position ``lens[i] - 1`` (already
        counted in ``lens``); its key/value go to that position's slot in ``tables[i]``.
        Everything is validated here on the host and uploaded in one asynchronous copy;
        the attention mask is built once for all layers; no kernel reads a value back, so
        on CUDA the step runs without a single host synchronisation.
        """
        if len(tokens) != len(lens):
            raise ShapeMismatch(f"{len(tokens)} tokens for a batch of {len(lens)}")
        self._check_pool(pool)
        self._check_tokens(tokens)
        bs = pool.block_size
        batch = DecodeBatch.build(
            tables,
            lens,
            block_size=bs,
            num_blocks=pool.num_blocks,
            device=self.device,
            tokens=tokens,
        )
        self._check_len(batch.max_len)
        last = [(t[(n - 1) // bs], (n - 1) % bs) for t, n in zip(tables, lens, strict=True)]
        if len(set(last)) != len(last):
            raise InvalidBlock("two sequences would write the same slot: copy-on-write first")
        assert batch.tokens is not None
        slots = batch.last_slots()
        pos = batch.lens - 1
        attend = DecodeAttention(batch, backend=backend, device=self.device)
        x = self.embed[batch.tokens]
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, pos)
            pool.write(layer, slots, k, v, validate_slots=False)
            x = self._finish_layer(layer, x, attend(q, pool.keys(layer), pool.values(layer)))
        return self._logits(x)

    def _check_pool(self, pool: KVPool) -> None:
        cfg = self.config
        want = (cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, self.dtype, self.device)
        got = (pool.num_layers, pool.num_kv_heads, pool.head_dim, pool.dtype, pool.device)
        if want != got:
            raise ShapeMismatch(f"pool (layers, kv heads, dim, dtype, device) {got} != {want}")

    # -- dense: a contiguous max_len reservation per sequence ---------------------------
    @torch.no_grad()
    def generate_dense(self, prompts: Sequence[Sequence[int]], max_new: int) -> list[list[int]]:
        """Greedy generation with a contiguous cache: ``max_new`` new tokens per prompt."""
        if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 0:
            raise InvalidLength(f"max_new must be a non-negative int, got {max_new!r}")
        if not prompts or any(not p for p in prompts):
            raise InvalidLength("need at least one prompt, each with at least one token")
        max_len = max(len(p) for p in prompts) + max_new
        self._check_len(max_len)
        cache = DenseKVCache(self, len(prompts), max_len)
        out: list[list[int]] = [[] for _ in prompts]
        last: list[int] = []
        for i, p in enumerate(prompts):
            last.append(int(cache.prefill(i, p).argmax()))
        for step in range(max_new):
            for i, t in enumerate(last):
                out[i].append(t)
            if step == max_new - 1:
                break
            last = cache.decode(last).argmax(-1).tolist()
        return out


class DenseKVCache:
    """Keys/values in ``[batch, kv_heads, max_len, dim]`` per layer: the pre-paging layout."""

    def __init__(self, model: TinyLlama, batch: int, max_len: int) -> None:
        cfg = model.config
        shape = (cfg.n_layers, 2, batch, cfg.n_kv_heads, max_len, cfg.head_dim)
        self.model = model
        self.kv = torch.zeros(shape, dtype=model.dtype, device=model.device)
        self.lens = torch.zeros(batch, dtype=torch.int64, device=model.device)
        self.max_len = max_len

    @torch.no_grad()
    def prefill(self, row: int, tokens: Sequence[int]) -> torch.Tensor:
        """Fill row ``row`` with a prompt; return its last logits."""
        m, n = self.model, len(tokens)
        if not 0 < n <= self.max_len:
            raise InvalidLength(f"a prompt of {n} tokens does not fit max_len={self.max_len}")
        pos = torch.arange(n, device=m.device)
        x = m.embed[m._tokens(tokens)]
        for layer in range(m.config.n_layers):
            q, k, v = m._qkv(layer, x, pos)
            self.kv[layer, 0, row, :, :n] = k.transpose(0, 1)
            self.kv[layer, 1, row, :, :n] = v.transpose(0, 1)
            attn = dense_attention(
                q.transpose(0, 1)[None],
                k.transpose(0, 1)[None],
                v.transpose(0, 1)[None],
                causal=True,
            )[0].transpose(0, 1)
            x = m._finish_layer(layer, x, attn)
        self.lens[row] = n
        return m._logits(x[-1])

    @torch.no_grad()
    def decode(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append one token to every row; return logits ``[batch, vocab]``."""
        m = self.model
        if len(tokens) != self.lens.numel():
            raise ShapeMismatch(f"{len(tokens)} tokens for {self.lens.numel()} rows")
        if int(self.lens.max()) >= self.max_len:
            raise InvalidLength(f"a row is full (max_len={self.max_len})")
        pos = self.lens.clone()
        rows = torch.arange(len(tokens), device=m.device)
        visible = torch.arange(self.max_len, device=m.device)[None, :] <= pos[:, None]
        x = m.embed[m._tokens(tokens)]
        for layer in range(m.config.n_layers):
            q, k, v = m._qkv(layer, x, pos)
            self.kv[layer, 0, rows, :, pos] = k
            self.kv[layer, 1, rows, :, pos] = v
            attn = F.scaled_dot_product_attention(
                q[:, :, None, :],
                self.kv[layer, 0],
                self.kv[layer, 1],
                attn_mask=visible[:, None, None, :],
                enable_gqa=True,
            )[:, :, 0, :]
            x = m._finish_layer(layer, x, attn)
        self.lens += 1
        return m._logits(x)


@dataclass(frozen=True)
class GreedyComparison:
    """Where two greedy continuations of one prompt part, and whether it was a near-tie.

    ``gap`` is the reference forward pass's logit of ``want``'s token minus that of
    ``got``'s at the first differing position: a near-tie when it is within ``tolerance``.
    """

    equal: bool
    near_tie: bool
    position: int | None = None
    gap: float | None = None
    tolerance: float | None = None


def compare_greedy(
    model: TinyLlama,
    prompt: Sequence[int],
    got: Sequence[int],
    want: Sequence[int],
    *,
    rtol: float = BF16_TIE_RTOL,
) -> GreedyComparison:
    """Compare two greedy continuations; a first difference whose logit gap (recomputed
    by :meth:`TinyLlama.forward`) is at most ``rtol`` x the largest logit is a near-tie."""
    if list(got) == list(want):
        return GreedyComparison(equal=True, near_tie=False)
    i = next(
        (j for j, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )
    if i == min(len(got), len(want)):  # one is a prefix of the other: not a tie question
        return GreedyComparison(equal=False, near_tie=False, position=i)
    logits = model(list(prompt) + list(want[:i]))[-1].float()
    gap = float(logits[want[i]] - logits[got[i]])
    tolerance = rtol * float(logits.abs().max())
    return GreedyComparison(
        equal=False, near_tie=abs(gap) <= tolerance, position=i, gap=gap, tolerance=tolerance
    )
