"""The token-budget scheduler: chunked prefill under a per-step token budget, as vLLM v1 schedules.

The v0-style :class:`~servelab.kv.scheduler.Scheduler` admits whole prompts and decodes one
token per running sequence. This one thinks in tokens instead. Every request has
``num_computed_tokens``: how many of its tokens already hold KV. A step hands out at most
``max_num_batched_tokens`` tokens of compute and runs at most ``max_num_seqs`` requests:

1. **Retire** the running requests that have generated all their tokens (their blocks are freed).
2. **Running first**, in admission order: each gets the tokens it still needs (one for a
   decode, the rest of its prompt for a chunked prefill), cut to what is left of the budget.
   Blocks are allocated for those new tokens only. When the pool cannot hold them, the
   *latest* running request is preempted by recompute (its blocks freed, its
   ``num_computed_tokens`` reset to 0, back to the front of ``waiting``) and the allocation is
   retried; a request that has to preempt itself ends the running phase.
3. **Then waiting**, first come first served, unless this step preempted: the head's prefix
   hit counts as computed (never against the budget), the rest of its tokens is cut to the
   budget, and admission stops at the first request whose blocks do not fit, or at the cap.

A long prompt therefore runs over several steps in chunks, and the decodes of running requests
are never stalled behind it. A chunk's tokens are ``token_ids[start:start + num_tokens]``; they
attend to the KV already cached for the request plus their own causal chunk. The chunk that
reaches the end of a request's tokens *samples*: its last logits give the next token. The
prefix-cache hit is capped below the request's length, so a full-prompt hit still computes (and
samples from) the last token.

The **watermark** (vLLM PR #44594 semantics) is off by default: ``watermark`` is the fraction
of the pool an admission must leave free. It counts every block the admission takes from the
free count: the new blocks for the admitted tokens, and the prefix-cache hits on cached *free*
blocks, which an admission revives out of the evictable list (vLLM v1 counts them the same way
in ``get_num_blocks_to_allocate``); hits on blocks in use cost nothing. It is skipped while
nothing is running, so the first request is never held back by it.

:meth:`TokenBudgetScheduler.add` rejects, with :class:`~servelab.kv.scheduler.RequestTooLarge`,
a request whose longest KV (prompt + max_new_tokens - 1 tokens: the last sampled token never
needs a slot) needs more blocks than the pool has: it would preempt itself forever. Anything
smaller always finishes: the oldest running request is never a victim unless it is alone, and
alone it fits.

Token accounting, which the engine relies on: a request's KV slots are exactly its
``num_computed_tokens`` between steps; after a step that samples from it, the engine appends
one token with :meth:`~servelab.kv.scheduler.Sequence.append_token` before the next
:meth:`~TokenBudgetScheduler.step`, and appends nothing to the others.

The block manager is anything with the :class:`~servelab.kv.scheduler.KVCacheManager` surface;
a prefix lookup is used when it has ``num_cached_tokens`` (the
:class:`~servelab.kv.prefix.PrefixCachingBlockManager`). The scheduler never forks, so no tail
block is ever shared and a step's copy-on-write list stays empty with the reference managers;
it is passed on if a manager returns copies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

from servelab.kv.blocks import OutOfBlocks, UnknownSequence
from servelab.kv.scheduler import (
    DuplicateSequence,
    InvalidRequest,
    InvalidSchedulerConfig,
    KVCacheManager,
    NotASequence,
    RequestTooLarge,
    SchedulerError,
    Sequence,
    TokenNotAppended,
)

__all__ = [
    "BudgetStep",
    "Chunk",
    "PrefixLookup",
    "TokenBudgetScheduler",
    "blocks_taken",
    "max_kv_tokens",
]


@runtime_checkable
class PrefixLookup(Protocol):
    """A manager that can say, without side effects, how many leading tokens it caches."""

    def num_cached_tokens(self, token_ids: SequenceOf[int], /) -> int: ...


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def blocks_taken(bm: KVCacheManager, token_ids: SequenceOf[int]) -> int:
    """How far allocating ``token_ids`` for a new request lowers ``bm.num_free``: its new
    blocks, plus the cached free blocks its prefix hit revives (when ``bm`` caches)."""
    count = getattr(bm, "num_blocks_taken", None)
    return count(token_ids) if count is not None else bm.blocks_needed(len(token_ids))


def max_kv_tokens(seq: Sequence) -> int:
    """The most KV slots ``seq`` ever holds: every token but the last one it samples."""
    return seq.prompt_len + seq.max_new_tokens - 1


class Chunk(NamedTuple):
    """The tokens of one request that run in this step.

    Tokens ``[0, start)`` already hold KV (computed in earlier steps, or ``num_cached`` of them
    found in the prefix cache at admission in this step); ``token_ids[start:start + num_tokens]``
    run now, at positions ``start ..``, writing their KV into the flat ``slots`` (``block *
    block_size + offset``, one per token). ``samples``: this chunk reaches the end of the
    request's tokens, so its last logits give the next token.
    """

    seq: Sequence
    start: int
    num_tokens: int
    slots: list[int]
    samples: bool
    num_cached: int = 0

    @property
    def positions(self) -> range:
        return range(self.start, self.start + self.num_tokens)

    @property
    def token_ids(self) -> list[int]:
        return self.seq.token_ids[self.start : self.start + self.num_tokens]

    @property
    def is_decode(self) -> bool:
        """One sampled token whose predecessor tokens all hold KV and that is not a prompt
        token: what a batched decode kernel takes."""
        return self.num_tokens == 1 and self.samples and self.start >= self.seq.prompt_len


@dataclass
class BudgetStep:
    """What one step decided. ``scheduled`` lists the running requests' chunks first (in
    running order; the first ``num_running`` entries), then the admitted ones (in admission
    order, which is also the order they must run in: a later admission may hit blocks an
    earlier one fills in this step). ``copies`` are copy-on-write ``(src, dst)`` block copies
    to make before any write; ``preempted`` lists victims in the order chosen (latest first);
    ``finished`` the requests retired at the start of the step, whose blocks are already free.
    """

    scheduled: list[Chunk] = field(default_factory=list)
    num_running: int = 0
    copies: list[tuple[int, int]] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    finished: list[Sequence] = field(default_factory=list)

    @property
    def num_batched_tokens(self) -> int:
        """Tokens computed in this step: what the budget bounds."""
        return sum(c.num_tokens for c in self.scheduled)

    @property
    def admitted(self) -> list[Chunk]:
        return self.scheduled[self.num_running :]

    def computed(self) -> list[Sequence]:
        """The requests that sample a token in this step, in scheduled order."""
        return [c.seq for c in self.scheduled if c.samples]


class TokenBudgetScheduler:
    """Schedule tokens, not sequences: a per-step token budget with chunked prefill.

    ``max_num_batched_tokens`` bounds the tokens computed per step, ``max_num_seqs`` the
    running requests, and ``watermark`` (a fraction in ``[0, 1)``, default 0: off) the share of
    the pool an admission leaves free. See the module docstring for the rules.
    """

    def __init__(
        self,
        bm: KVCacheManager,
        *,
        max_num_batched_tokens: int = 2048,
        max_num_seqs: int = 256,
        watermark: float = 0.0,
    ) -> None:
        for name, value in (
            ("max_num_batched_tokens", max_num_batched_tokens),
            ("max_num_seqs", max_num_seqs),
        ):
            if not _is_int(value) or value < 1:
                raise InvalidSchedulerConfig(f"{name} must be a positive int, got {value!r}")
        if (
            isinstance(watermark, bool)
            or not isinstance(watermark, (int, float))
            or not 0 <= watermark < 1
        ):
            raise InvalidSchedulerConfig(
                f"watermark is a fraction of the pool in [0, 1) (0 turns it off), got {watermark!r}"
            )
        self.bm: KVCacheManager = bm
        self.max_num_batched_tokens: int = max_num_batched_tokens
        self.max_num_seqs: int = max_num_seqs
        self.watermark: float = float(watermark)
        self.watermark_blocks: int = int(bm.num_blocks * watermark)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions: int = 0
        self._live: dict[int, Sequence] = {}
        self._computed: dict[int, int] = {}  # seq id -> num_computed_tokens
        self._expected: dict[int, int] = {}  # running seq id -> its token count at next step()
        self._lookup = bm.num_cached_tokens if isinstance(bm, PrefixLookup) else None

    # ------------------------------------------------------------------ queries
    @property
    def is_idle(self) -> bool:
        """Nothing running and nothing waiting."""
        return not self.running and not self.waiting

    def sequence(self, seq_id: int) -> Sequence:
        """The live (waiting or running) request with this id."""
        try:
            return self._live[seq_id]
        except (KeyError, TypeError):
            raise UnknownSequence(f"sequence {seq_id!r} is not waiting or running") from None

    def num_computed_tokens(self, seq_id: int) -> int:
        """Tokens of the live request ``seq_id`` that hold KV (0 while it waits)."""
        self.sequence(seq_id)
        return self._computed[seq_id]

    # ---------------------------------------------------------------- mutations
    def add(self, seq: Sequence) -> None:
        """Queue ``seq`` at the back of ``waiting``.

        Raises NotASequence for a non-Sequence, InvalidRequest for a finished one,
        DuplicateSequence for an id in use (queued, running or held by the block manager) and
        RequestTooLarge for a request whose KV can never fit the pool. Nothing changes when it
        raises.
        """
        if not isinstance(seq, Sequence):
            raise NotASequence(f"add() takes a Sequence, got {type(seq).__name__}")
        if seq.is_finished:
            raise InvalidRequest(f"sequence {seq.seq_id} has nothing left to generate")
        if seq.seq_id in self._live or self._held_by_block_manager(seq.seq_id):
            raise DuplicateSequence(f"sequence id {seq.seq_id} is already in use")
        need = self.bm.blocks_needed(max_kv_tokens(seq))
        if need > self.bm.num_blocks:
            raise RequestTooLarge(
                f"sequence {seq.seq_id} needs up to {need} blocks ({seq.prompt_len} prompt + "
                f"{seq.max_new_tokens} new tokens, the last of which needs no slot, "
                f"{self.bm.block_size} per block) but the pool has {self.bm.num_blocks}"
            )
        self.waiting.append(seq)
        self._live[seq.seq_id] = seq
        self._computed[seq.seq_id] = 0

    def step(self) -> BudgetStep:
        """Retire finished requests, schedule the running ones (preempting the latest when
        blocks run out), then admit waiting ones into what is left of the budget.

        Raises TokenNotAppended, changing nothing, when the previous step's sampled tokens were
        not appended exactly (one to each request that sampled, none to the others).
        """
        self._check_tokens_appended()
        out = BudgetStep()
        self._retire(out)
        budget = self._schedule_running(out, self.max_num_batched_tokens)
        out.num_running = len(out.scheduled)
        if not out.preempted:
            self._admit(out, budget)
        for chunk in out.scheduled:
            seq = chunk.seq
            self._computed[seq.seq_id] = end = chunk.start + chunk.num_tokens
            self._expected[seq.seq_id] = end + 1 if chunk.samples else seq.num_tokens
        return out

    # ----------------------------------------------------------------- the step
    def _check_tokens_appended(self) -> None:
        for seq in self.running:
            want = self._expected[seq.seq_id]
            if len(seq.token_ids) != want:
                raise TokenNotAppended(
                    f"sequence {seq.seq_id} has {seq.num_tokens} tokens, {want} expected: after "
                    "a step, append exactly one sampled token to every request in "
                    "BudgetStep.computed() and none to the others before calling step() again"
                )

    def _retire(self, out: BudgetStep) -> None:
        if not any(seq.is_finished for seq in self.running):
            return
        still_running = []
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                self._forget(seq.seq_id)
                out.finished.append(seq)
            else:
                still_running.append(seq)
        self.running = still_running

    def _schedule_running(self, out: BudgetStep, budget: int) -> int:
        """The running phase; returns the budget left."""
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            start = self._computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            while True:
                try:
                    slots = self._extend(seq, start, n, out)
                    break
                except OutOfBlocks:
                    victim = running.pop()  # the latest: the lowest priority
                    self._preempt(victim, out)
                    if victim is seq:
                        return budget  # nobody left to preempt: the running phase ends
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            budget -= n
            i += 1
        return budget

    def _extend(self, seq: Sequence, start: int, n: int, out: BudgetStep) -> list[int]:
        """Slots for ``token_ids[start:start + n]`` of a running request, all or nothing
        (OutOfBlocks, changing nothing, when the new blocks they need are not free)."""
        bm = self.bm
        need = bm.blocks_needed(start + n) - bm.blocks_needed(start)
        if need > bm.num_free:
            raise OutOfBlocks(
                f"sequence {seq.seq_id} needs {need} new blocks for {n} tokens, "
                f"only {bm.num_free} are free"
            )
        size = bm.block_size
        slots = []
        for token in seq.token_ids[start : start + n]:
            slot = bm.append_slot(seq.seq_id, token)
            slots.append(slot.block * size + slot.offset)
            if slot.cow_src is not None:
                out.copies.append((slot.cow_src, slot.block))
        return slots

    def _preempt(self, victim: Sequence, out: BudgetStep) -> None:
        """Preempt by recompute: free the blocks (a prefix cache keeps the full ones, to be
        revived on re-admission), reset ``num_computed_tokens``, requeue at the front."""
        self.bm.free_seq(victim.seq_id)
        self._computed[victim.seq_id] = 0
        del self._expected[victim.seq_id]
        self.waiting.appendleft(victim)
        out.preempted.append(victim)
        self.num_preemptions += 1

    def _admit(self, out: BudgetStep, budget: int) -> None:
        bm, size = self.bm, self.bm.block_size
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self._lookup(seq.token_ids) if self._lookup is not None else 0
            n = min(seq.num_tokens - hit, budget)
            if (
                self.watermark_blocks
                and self.running
                and bm.num_free - blocks_taken(bm, seq.token_ids[: hit + n]) < self.watermark_blocks
            ):
                break  # keep headroom for the running requests' growth
            try:
                cached = bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                break  # FCFS: nobody overtakes the head of the queue
            if cached != hit:
                bm.free_seq(seq.seq_id)
                raise SchedulerError(
                    f"the block manager found {cached} cached tokens for sequence {seq.seq_id} "
                    f"but num_cached_tokens said {hit}: they must agree"
                )
            self.waiting.popleft()
            self.running.append(seq)
            table = bm.block_table(seq.seq_id)
            slots = [table[p // size] * size + p % size for p in range(hit, hit + n)]
            out.scheduled.append(Chunk(seq, hit, n, slots, hit + n == seq.num_tokens, hit))
            budget -= n

    def _forget(self, seq_id: int) -> None:
        del self._live[seq_id]
        del self._computed[seq_id]
        self._expected.pop(seq_id, None)

    def _held_by_block_manager(self, seq_id: int) -> bool:
        try:
            self.bm.seq_len(seq_id)
        except UnknownSequence:
            return False
        return True

    def __repr__(self) -> str:
        return (
            f"TokenBudgetScheduler(running={len(self.running)}, waiting={len(self.waiting)}, "
            f"budget={self.max_num_batched_tokens}, max_num_seqs={self.max_num_seqs}, "
            f"free={self.bm.num_free}/{self.bm.num_blocks})"
        )
