"""The serving loop: requests in, tokens out, through scheduler, block manager, pool and model.

Each :meth:`Engine.step` asks the :class:`~servelab.kv.scheduler.Scheduler` what to run and
then carries out its :class:`~servelab.kv.scheduler.StepOutput` on the device, in the order
that keeps every block's contents right:

1. **swap out** victims' blocks to host memory (their device blocks were freed in this step
   and may be handed to someone else below, so they are read first);
2. **swap in** the blocks of re-admitted swapped sequences;
3. **copy-on-write**: one batched copy for every decode whose slot names a ``cow_src``;
4. **decode** all running sequences in one batch through paged attention;
5. **prefill** admitted sequences (skipping tokens found in the prefix cache), in admission
   order;
6. sample one token per computed sequence and append it.

Why decodes come before prefills. The block manager enters a block in the prefix cache as
soon as its last slot is *reserved* (a prompt's full blocks at ``allocate``, a block that a
decode's token fills at ``append_slots``), before its KV is written: the engine orders each
step so that nothing reads a slot before it is written, rather than the manager registering
blocks late. A decode reads only its own sequence's blocks, written in earlier steps (or
copied in 3.), and writes its token's KV; a prompt admitted in the same step may hit a block
that this very decode fills, so every prefill runs after the decodes. Prefills run in
admission order, so a prompt that hits blocks an earlier prompt of this step registered reads
them after that prompt wrote them.

Token budget. With ``scheduler="token-budget"`` the
:class:`~servelab.kv.budget.TokenBudgetScheduler` decides instead, and a step is a list of
chunks: the running requests' one-token decodes go to the batched decode, every other chunk
(a piece of a prompt, a recompute, a suffix after a prefix hit) through ``prefill`` with
``start`` at the request's computed tokens, so it attends to its cached KV plus its own causal
chunk, whether or not ``start`` falls on a block boundary.

Prefix caching. With ``prefix_caching=True`` the block manager is a
:class:`~servelab.kv.prefix.PrefixCachingBlockManager`. The scheduler hands either manager
the token ids (:class:`~servelab.kv.scheduler.KVCacheManager`), and each
:class:`~servelab.kv.scheduler.Prefill` says how many leading tokens the cache already holds.

Parallel sampling. A request with ``n > 1`` is admitted as one sequence; right after its
prompt is prefilled, ``n - 1`` children are ``fork``-ed from it, sharing every prompt block.
Each sample then draws its own first token from the same logits. The trailing partial block
is copied by the first sibling that writes to it (copy-on-write), full blocks stay shared.
Under the token-budget scheduler a request with ``n > 1`` fans out instead, as vLLM v1 does
(``ParentRequest``): ``n`` independent sequences with the same prompt, queued together. With
prefix caching the later ones hit the full prompt blocks the first registered (in the same
step, since admissions run in order) and compute only the last partial block; without it each
holds its own copy. Nothing is forked, so nothing is copied on write, and a preempted sample is
recomputed alone. v1 has no swap either: it preempts by recompute only.

Sampling is greedy at temperature 0; otherwise Gumbel-max with noise drawn from a generator
seeded by (the sample's seed, its position), so a token never depends on batching, forking
or preemption — which is what lets tests demand exact equality with independent runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Literal

import torch

from servelab.kv.attention import Backend
from servelab.kv.blocks import BlockManager, InvalidConfig, KVCacheError
from servelab.kv.budget import BudgetStep, TokenBudgetScheduler
from servelab.kv.model import TinyLlama
from servelab.kv.offload.connector import OffloadConnector, OffloadingBlockManager, build_hierarchy
from servelab.kv.pool import SwapSpace, pinning_available
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import KVCacheManager, Preemption, Scheduler, Sequence, StepOutput

__all__ = [
    "Completion",
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineStats",
    "InvalidSamplingRequest",
    "Request",
    "SchedulerKind",
]

SchedulerKind = Literal["v0", "token-budget"]


class EngineError(KVCacheError):
    """Base of the engine's own errors."""


class InvalidSamplingRequest(EngineError, ValueError):
    """A request whose prompt, length, sample count, temperature or seed is malformed."""


@dataclass(frozen=True)
class Request:
    """A prompt, how many tokens to generate, and how to sample them.

    ``n`` samples share the prompt's KV blocks (fork). Sample ``i`` uses seed ``seed + i``,
    so it equals an independent request with ``n=1`` and that seed.
    """

    prompt: tuple[int, ...]
    max_new_tokens: int
    n: int = 1
    temperature: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.prompt or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.prompt
        ):
            raise InvalidSamplingRequest("prompt must be a non-empty sequence of token ids >= 0")
        for name in ("max_new_tokens", "n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSamplingRequest(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.temperature, (int, float)) or not self.temperature >= 0:
            raise InvalidSamplingRequest(f"temperature must be >= 0, got {self.temperature!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InvalidSamplingRequest(f"seed must be a non-negative int, got {self.seed!r}")

    @classmethod
    def of(
        cls,
        prompt: Iterable[int],
        max_new_tokens: int,
        *,
        n: int = 1,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> Request:
        return cls(tuple(prompt), max_new_tokens, n, temperature, seed)


@dataclass
class Completion:
    """The generated tokens of one request: one list per sample."""

    request_id: int
    request: Request
    samples: list[list[int]]


@dataclass(frozen=True)
class EngineConfig:
    """Pool size and policies. ``num_host_blocks`` is swap space (used with ``"swap"``).

    ``scheduler="v0"`` (the default) admits whole prompts by watermark and decodes one token per
    sequence (:class:`~servelab.kv.scheduler.Scheduler`); ``"token-budget"`` schedules
    ``max_num_batched_tokens`` tokens per step with chunked prefill, at most ``max_num_seqs``
    running, and the opt-in ``budget_watermark`` fraction
    (:class:`~servelab.kv.budget.TokenBudgetScheduler`; recompute only, as in vLLM v1: no swap).
    """

    num_blocks: int = 256
    block_size: int = 16
    prefix_caching: bool = True
    preemption: Preemption = "recompute"
    num_host_blocks: int = 0
    watermark: int | None = None
    backend: Backend | None = None
    scheduler: SchedulerKind = "v0"
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    budget_watermark: float = 0.0
    offload_cpu_bytes: int = 0
    offload_disk_bytes: int = 0
    offload_disk_dir: str | None = None
    offload_write_through: bool = False

    def __post_init__(self) -> None:
        for name in ("num_blocks", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidConfig(f"{name} must be a positive int, got {value!r}")
        if self.scheduler not in ("v0", "token-budget"):
            raise InvalidConfig(f"scheduler must be 'v0' or 'token-budget', got {self.scheduler!r}")
        if self.scheduler == "token-budget" and (
            self.preemption != "recompute" or self.num_host_blocks
        ):
            raise InvalidConfig("the token-budget scheduler preempts by recompute only")
        for name in ("offload_cpu_bytes", "offload_disk_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidConfig(f"{name} must be an int >= 0, got {value!r}")
        if self.offload_cpu_bytes and (self.scheduler != "v0" or not self.prefix_caching):
            raise InvalidConfig("KV offload needs prefix_caching=True and the v0 scheduler")
        if (self.offload_disk_bytes or self.offload_disk_dir) and not self.offload_cpu_bytes:
            raise InvalidConfig("a disk tier sits under a CPU tier: set offload_cpu_bytes too")


@dataclass
class EngineStats:
    """Counters over the engine's life (the demo's summary reads them)."""

    steps: int = 0
    prompt_tokens: int = 0  # tokens prefilled, recompute included
    cached_tokens: int = 0  # of those, found in the prefix cache (not computed)
    offloaded_tokens: int = 0  # of those, loaded from the offload tiers (not computed)
    decode_tokens: int = 0
    generated_tokens: int = 0
    preemptions: int = 0
    swapped_out_blocks: int = 0
    swapped_in_blocks: int = 0
    cow_copies: int = 0
    forks: int = 0
    peak_blocks_used: int = 0
    wall_s: float = 0.0
    # KV slots summed over steps: held by tokens, reserved by block tables, and what a
    # contiguous reservation of prompt + max_new_tokens per sequence would hold
    slots_used: int = 0
    slots_paged: int = 0
    slots_contiguous: int = 0
    slots_max_seq_len: int = 0  # a reservation of the model's max_seq_len per sequence
    blocks_referenced: int = 0  # block-table entries, summed over steps
    blocks_distinct: int = 0  # physical blocks in use, summed over steps

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s else 0.0

    @property
    def paged_waste(self) -> float:
        """Fraction of reserved KV slots holding no token (only last blocks' tails)."""
        return 1 - self.slots_used / self.slots_paged if self.slots_paged else 0.0

    @property
    def contiguous_waste(self) -> float:
        """The same fraction for a contiguous prompt + max_new_tokens reservation."""
        return 1 - self.slots_used / self.slots_contiguous if self.slots_contiguous else 0.0

    @property
    def max_seq_len_waste(self) -> float:
        """The same fraction when every sequence reserves the model's whole context."""
        return 1 - self.slots_used / self.slots_max_seq_len if self.slots_max_seq_len else 0.0

    @property
    def sharing_saving(self) -> float:
        """Fraction of block-table entries served by a block another table also holds."""
        if not self.blocks_referenced:
            return 0.0
        return 1 - self.blocks_distinct / self.blocks_referenced


@dataclass
class _Sample:
    request_id: int
    index: int
    seed: int
    temperature: float


@dataclass
class _Group:
    request: Request
    seqs: list[Sequence] = field(default_factory=list)
    forked: bool = False


class Engine:
    """Serve :class:`Request` s with a :class:`TinyLlama` on its device."""

    def __init__(self, model: TinyLlama, config: EngineConfig | None = None) -> None:
        self.model = model
        self.config = cfg = config or EngineConfig()
        self.pool = model.new_pool(cfg.num_blocks, cfg.block_size)
        self._seqs: dict[int, Sequence] = {}
        self._samples: dict[int, _Sample] = {}
        self._groups: dict[int, _Group] = {}
        self._done: dict[int, Completion] = {}
        self._next_seq = 0
        self._next_request = 0
        self.prefix: PrefixCachingBlockManager | None = None
        self.offload: OffloadConnector | None = None
        bm: KVCacheManager
        if cfg.offload_cpu_bytes:
            self.prefix = bm = OffloadingBlockManager(cfg.num_blocks, cfg.block_size)
            tiers = build_hierarchy(
                cpu_bytes=cfg.offload_cpu_bytes,
                disk_bytes=cfg.offload_disk_bytes,
                disk_dir=cfg.offload_disk_dir,
                write_through=cfg.offload_write_through,
            )
            self.offload = OffloadConnector(
                self.pool, bm, tiers, write_through=cfg.offload_write_through
            )
        elif cfg.prefix_caching:
            self.prefix = bm = PrefixCachingBlockManager(cfg.num_blocks, cfg.block_size)
        else:
            bm = BlockManager(cfg.num_blocks, cfg.block_size)
        self.scheduler: Scheduler | TokenBudgetScheduler
        self._budget: TokenBudgetScheduler | None = None
        if cfg.scheduler == "token-budget":
            self.scheduler = self._budget = TokenBudgetScheduler(
                bm,
                max_num_batched_tokens=cfg.max_num_batched_tokens,
                max_num_seqs=cfg.max_num_seqs,
                watermark=cfg.budget_watermark,
            )
        else:
            self.scheduler = Scheduler(
                bm,
                watermark=cfg.watermark,
                preemption=cfg.preemption,
                num_host_blocks=cfg.num_host_blocks,
            )
        self.bm = bm
        # swap space: pinned on CUDA, filled and drained by asynchronous copies
        self._host = SwapSpace(self.pool, cfg.num_host_blocks) if cfg.num_host_blocks else None
        self.stats = EngineStats()

    # -- requests ----------------------------------------------------------------------
    def add(self, request: Request) -> int:
        """Queue a request; returns its id. Raises the scheduler's errors unchanged."""
        if not isinstance(request, Request):
            raise InvalidSamplingRequest(f"add() takes a Request, got {type(request).__name__}")
        vocab = self.model.config.vocab_size
        if max(request.prompt) >= vocab:
            raise InvalidSamplingRequest(f"a prompt token is outside the vocabulary ({vocab})")
        total = len(request.prompt) + request.max_new_tokens
        if total > self.model.config.max_seq_len:
            raise InvalidSamplingRequest(
                f"prompt + max_new_tokens = {total} exceeds the model's max_seq_len "
                f"{self.model.config.max_seq_len}"
            )
        if self._budget is not None:
            return self._add_fanned_out(request, self._budget)
        seq = Sequence.from_prompt(self._next_seq, request.prompt, request.max_new_tokens)
        self._seqs[seq.seq_id] = seq
        try:
            self.scheduler.add(seq)
        except BaseException:
            del self._seqs[seq.seq_id]
            raise
        rid = self._next_request
        self._next_request += 1
        self._next_seq += 1
        self._samples[seq.seq_id] = _Sample(rid, 0, request.seed, request.temperature)
        self._groups[rid] = _Group(request, [seq])
        return rid

    def _add_fanned_out(self, request: Request, scheduler: TokenBudgetScheduler) -> int:
        """Queue ``request.n`` sequences of one request (see the module docstring). They are
        alike, so the first ``add`` raises whatever any would, before anything changes."""
        seqs = [
            Sequence.from_prompt(self._next_seq + i, request.prompt, request.max_new_tokens)
            for i in range(request.n)
        ]
        for seq in seqs:
            scheduler.add(seq)
        rid = self._next_request
        self._next_request += 1
        self._next_seq += request.n
        for i, seq in enumerate(seqs):
            self._seqs[seq.seq_id] = seq
            self._samples[seq.seq_id] = _Sample(rid, i, request.seed + i, request.temperature)
        self._groups[rid] = _Group(request, seqs, forked=True)
        return rid

    @property
    def is_idle(self) -> bool:
        return self.scheduler.is_idle

    def completions(self) -> list[Completion]:
        """Finished requests so far, by request id."""
        return [self._done[r] for r in sorted(self._done)]

    def run(
        self, requests: Iterable[Request], *, progress: Callable[[int], None] | None = None
    ) -> list[Completion]:
        """Serve ``requests`` to completion; ``progress(n)`` is told of each n new tokens."""
        ids = [self.add(r) for r in requests]
        while not self.is_idle:
            made = self.step()
            if progress is not None and made:
                progress(made)
        return [self._done[i] for i in ids]

    # -- one step ----------------------------------------------------------------------
    def step(self) -> int:
        """Run one scheduler step on the device; returns the number of tokens sampled."""
        scheduler = self.scheduler
        if isinstance(scheduler, TokenBudgetScheduler):
            return self._step_budget(scheduler)
        t0 = time.perf_counter()
        out = scheduler.step()
        self._swap(out)
        cows = [(d.slot.cow_src, d.slot.block) for d in out.decodes if d.slot.cow_src is not None]
        self.pool.copy_blocks(cows)
        # decodes first: they write KV that a prompt admitted in this step may hit (see above)
        logits = self._decode(out) if out.decodes else None
        sampled: list[tuple[Sequence, torch.Tensor]] = []
        for p in out.prefills:
            sampled.extend(self._prefill(p.seq, p.num_tokens, p.num_cached))
        if logits is not None:
            sampled.extend((d.seq, logits[i]) for i, d in enumerate(out.decodes))
        tokens = self._sample(sampled)
        for (seq, _), tok in zip(sampled, tokens, strict=True):
            seq.append_token(tok)
        self._collect_finished()
        self._account(out, len(cows))
        self.stats.generated_tokens += len(tokens)
        self.stats.wall_s += time.perf_counter() - t0
        return len(tokens)

    def _step_budget(self, scheduler: TokenBudgetScheduler) -> int:
        """One token-budget step: copies, then the running requests' decodes in one batch,
        then every other chunk in scheduled order, each attending to the KV its request
        already holds plus its own causal chunk.

        Decodes go first because an admission of this step may hit a block a decode fills;
        admissions run after the running requests' chunks and in admission order, since a
        later admission may hit blocks an earlier chunk of this step fills.
        """
        t0 = time.perf_counter()
        out = scheduler.step()
        self.pool.copy_blocks(out.copies)
        decodes = [c for c in out.scheduled[: out.num_running] if c.is_decode]
        sampled: list[tuple[Sequence, torch.Tensor]] = []
        if decodes:
            logits = self.model.decode(
                self.pool,
                [c.seq.token_ids[c.start] for c in decodes],
                [self.bm.block_table(c.seq.seq_id) for c in decodes],
                [c.start + 1 for c in decodes],
                backend=self.config.backend,
            )
            sampled.extend((c.seq, logits[i]) for i, c in enumerate(decodes))
            self.stats.decode_tokens += len(decodes)
        batched = {id(c) for c in decodes}
        for c in out.scheduled:
            if id(c) in batched:
                continue
            end = c.start + c.num_tokens
            table = self.bm.block_table(c.seq.seq_id)
            last = self.model.prefill(self.pool, c.seq.token_ids[:end], table, start=c.start)
            self.stats.prompt_tokens += c.num_tokens + c.num_cached
            self.stats.cached_tokens += c.num_cached
            if c.samples:
                sampled.append((c.seq, last))
        tokens = self._sample(sampled)
        for (seq, _), tok in zip(sampled, tokens, strict=True):
            seq.append_token(tok)
        self._collect_finished()
        self._account(out, len(out.copies))
        self.stats.generated_tokens += len(tokens)
        self.stats.wall_s += time.perf_counter() - t0
        return len(tokens)

    def _swap(self, out: StepOutput) -> None:
        if out.swap_out:
            assert self._host is not None  # the scheduler swaps only with host blocks
            dev_blocks = [d for d, _ in out.swap_out]
            self.pool.swap_out(dev_blocks, self._host, [h for _, h in out.swap_out])
            self.stats.swapped_out_blocks += len(dev_blocks)
        if out.swap_in:
            assert self._host is not None
            pairs = list(out.swap_in)  # blocks found in the prefix cache are left out
            if pairs:
                self.pool.swap_in(self._host, [d for _, d in pairs], [h for h, _ in pairs])
            self.stats.swapped_in_blocks += len(pairs)

    def _prefill(self, seq: Sequence, n: int, cached: int) -> list[tuple[Sequence, torch.Tensor]]:
        table = self.bm.block_table(seq.seq_id)
        gpu_cached = cached
        if self.offload is not None:  # the GPU cache missed from here: try the tiers
            cached = self.offload.load(table, cached, n)
        logits = self.model.prefill(self.pool, seq.token_ids[:n], table, start=cached)
        if self.offload is not None and self.offload.write_through:
            self.offload.store_computed(table, n)
        self.stats.prompt_tokens += n
        self.stats.cached_tokens += gpu_cached
        self.stats.offloaded_tokens += cached - gpu_cached
        out = [(seq, logits)]
        sample = self._samples[seq.seq_id]
        group = self._groups[sample.request_id]
        if not group.forked and sample.index == 0:  # first prefill of a request: fork it
            group.forked = True
            for i in range(1, group.request.n):
                child = Sequence(
                    self._next_seq, list(seq.token_ids), seq.prompt_len, seq.max_new_tokens
                )
                self._next_seq += 1
                self._seqs[child.seq_id] = child
                assert isinstance(self.scheduler, Scheduler)  # n > 1 only with the v0 one
                self.scheduler.fork(seq, child)
                self._samples[child.seq_id] = _Sample(
                    sample.request_id, i, sample.seed + i, sample.temperature
                )
                group.seqs.append(child)
                self.stats.forks += 1
                out.append((child, logits))
        return out

    def _decode(self, out: StepOutput) -> torch.Tensor:
        """One batched decode step. The scheduler's slots are where the block tables put
        each newest token, so the model derives them on the device from the tables."""
        tables = [self.bm.block_table(d.seq.seq_id) for d in out.decodes]
        lens = [self.bm.seq_len(d.seq.seq_id) for d in out.decodes]
        tokens = [d.seq.token_ids[-1] for d in out.decodes]
        self.stats.decode_tokens += len(tokens)
        return self.model.decode(self.pool, tokens, tables, lens, backend=self.config.backend)

    def _sample(self, rows: Seq[tuple[Sequence, torch.Tensor]]) -> list[int]:
        """Greedy or Gumbel-max tokens; the one host synchronisation of a step is the
        final ``tolist`` (noise is made on the host, pinned, and uploaded asynchronously)."""
        if not rows:
            return []
        logits = torch.stack([r for _, r in rows]).float()
        temps = [self._samples[s.seq_id].temperature for s, _ in rows]
        if any(temps):
            vocab = logits.shape[-1]
            pin = pinning_available(logits.device)
            noise = torch.zeros(len(rows), vocab + 1, pin_memory=pin)  # last column: 1 / T
            scales = []
            for i, (seq, _) in enumerate(rows):
                sample = self._samples[seq.seq_id]
                scales.append(1.0 / sample.temperature if sample.temperature > 0 else 1.0)
                if sample.temperature > 0:
                    noise[i, :vocab] = _gumbel(sample.seed, seq.num_tokens, vocab)
            noise[:, vocab] = torch.tensor(scales)
            dev = noise.to(logits.device, non_blocking=pin)
            logits = logits * dev[:, vocab:] + dev[:, :vocab]
        return [int(t) for t in logits.argmax(-1).tolist()]

    def _collect_finished(self) -> None:
        """Record requests whose every sample has generated all its tokens."""
        for rid, group in list(self._groups.items()):
            if len(group.seqs) == group.request.n and all(s.is_finished for s in group.seqs):
                samples = [s.token_ids[s.prompt_len :] for s in group.seqs]
                self._done[rid] = Completion(rid, group.request, samples)
                for s in group.seqs:  # the scheduler frees their blocks at its next step
                    self._seqs.pop(s.seq_id, None)
                    self._samples.pop(s.seq_id, None)
                del self._groups[rid]

    def _account(self, out: StepOutput | BudgetStep, cows: int) -> None:
        st, bs = self.stats, self.pool.block_size
        st.steps += 1
        st.preemptions += len(out.preempted)
        st.cow_copies += cows
        distinct: set[int] = set()
        for seq in self.scheduler.running:
            table = self.bm.block_table(seq.seq_id)
            n = self.bm.seq_len(seq.seq_id)
            st.slots_used += n
            st.slots_paged += len(table) * bs
            st.slots_contiguous += seq.max_len
            st.slots_max_seq_len += self.model.config.max_seq_len
            st.blocks_referenced += len(table)
            distinct.update(table)
        st.blocks_distinct += len(distinct)
        st.peak_blocks_used = max(st.peak_blocks_used, len(distinct))


def _gumbel(seed: int, position: int, vocab: int) -> torch.Tensor:
    """Gumbel noise that depends only on (seed, position): sampling is batch-independent."""
    gen = torch.Generator().manual_seed((seed * 1_000_003 + position) % (2**63))
    u = torch.rand(vocab, generator=gen).clamp_(1e-12, 1 - 1e-7)
    return -torch.log(-torch.log(u))
