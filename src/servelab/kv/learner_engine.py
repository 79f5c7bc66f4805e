"""The engine over a learner's own block manager and scheduler: your code serves the model.

:class:`EngineSkeleton` is the reference :class:`~servelab.kv.engine.Engine` with two parts
swapped for the classes the course's notebooks build: the prefix-caching block manager of
notebook 05 (``allocate(seq, token_ids)``, ``append_slot(seq, token_id)``, ``fork``,
``free_seq``, ``block_table``, ``seq_len``) and the scheduler of notebook 04 (``add``,
``step()`` returning a :class:`~servelab.kv.scheduler.StepOutput`). Nothing new is asked of
those classes; two thin adapters translate:

* :class:`LearnerBlocks` stands between the two: the notebook-04 scheduler allocates by a
  token *count* and appends without a token id (it was written over a plain block manager),
  the notebook-05 manager wants the ids; the adapter looks them up in the sequence and
  remembers how many tokens each ``allocate`` found cached, and it answers
  ``blocks_needed``;
* :class:`LearnerScheduler` gives the engine what it asks of a scheduler (``fork`` for
  parallel sampling, ``is_idle``) and writes the cached count into each ``Prefill``.

What the learner writes is :meth:`EngineSkeleton.execute`: carry out one step's decisions on
the device, in an order that never reads a slot before it is written. It has three helpers,
:meth:`~EngineSkeleton.copy`, :meth:`~EngineSkeleton.decode` and
:meth:`~EngineSkeleton.prefill`, and each tells a :class:`~servelab.kv.ledger.SlotLedger` what
it reads and writes, so a wrong slot is reported by name (step, sequence, position, slot,
the block tables pointing there) the moment it is read, before a token goes wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import torch

from servelab.kv.attention import Backend
from servelab.kv.blocks import InvalidBlock, KVCacheError
from servelab.kv.engine import Engine, EngineConfig, _Sample
from servelab.kv.ledger import KVDivergence, SlotLedger
from servelab.kv.model import TinyLlama
from servelab.kv.scheduler import Decode, Prefill, Scheduler, Sequence, StepOutput

__all__ = [
    "EngineSkeleton",
    "ExecuteError",
    "LearnerBlocks",
    "LearnerScheduler",
    "StepRecord",
]

Rows = list[tuple[Sequence, torch.Tensor]]


class ExecuteError(KVCacheError, ValueError):
    """``execute`` returned the wrong rows (one ``(sequence, logits)`` per computed sequence),
    or handed a helper what this step never asked for."""


class LearnerBlocks:
    """A notebook-05 block manager, as the notebook-04 scheduler and the engine call it.

    ``tokens_of(seq_id)`` returns the live sequence's token ids. Every other attribute is
    the learner's own (the pictures read ``refcount``, ``free_list`` ... straight through).
    """

    def __init__(self, bm: Any, tokens_of: Callable[[int], list[int]]) -> None:
        self.bm = bm
        self._tokens_of = tokens_of
        self.cached: dict[int, int] = {}  # seq -> tokens its last allocate found cached

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bm, name)

    @property
    def num_blocks(self) -> int:
        return int(self.bm.num_blocks)

    @property
    def block_size(self) -> int:
        return int(self.bm.block_size)

    @property
    def num_free(self) -> int:
        return int(self.bm.num_free)

    def blocks_needed(self, n_tokens: int) -> int:
        """Blocks for ``n_tokens`` without sharing: admission stays conservative."""
        return -(-n_tokens // self.block_size)

    def allocate(self, seq: int, tokens: int | Seq[int]) -> int:
        ids = self._tokens_of(seq)[:tokens] if isinstance(tokens, int) else list(tokens)
        cached = self.bm.allocate(seq, ids)
        self.cached[seq] = cached if isinstance(cached, int) else 0
        return self.cached[seq]

    def append_slot(self, seq: int, token_id: int | None = None) -> Any:
        if token_id is None:
            token_id = self._tokens_of(seq)[-1]
        return self.bm.append_slot(seq, token_id)

    def fork(self, parent: int, child: int) -> None:
        self.bm.fork(parent, child)

    def free_seq(self, seq: int) -> None:
        self.bm.free_seq(seq)

    def block_table(self, seq: int) -> list[int]:
        return list(self.bm.block_table(seq))

    def seq_len(self, seq: int) -> int:
        return int(self.bm.seq_len(seq))

    def tables(self) -> dict[int, list[int]]:
        """Every live sequence's block table."""
        return {s: self.block_table(s) for s in self.bm.sequences()}


class LearnerScheduler:
    """A notebook-04 scheduler, as the engine calls it."""

    def __init__(self, scheduler: Any, blocks: LearnerBlocks) -> None:
        self.inner = scheduler
        self.blocks = blocks

    @property
    def running(self) -> list[Sequence]:
        return list(self.inner.running)

    @property
    def waiting(self) -> list[Sequence]:
        return list(self.inner.waiting)

    @property
    def is_idle(self) -> bool:
        return not self.inner.running and not self.inner.waiting

    def add(self, seq: Sequence) -> None:
        self.inner.add(seq)

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Parallel sampling: the child shares the parent's blocks and runs as the newest."""
        self.blocks.fork(parent.seq_id, child.seq_id)
        self.inner.running.append(child)

    def step(self) -> StepOutput:
        out: StepOutput = self.inner.step()
        cached = self.blocks.cached
        out.prefills = [
            Prefill(p.seq, p.num_tokens, cached.pop(p.seq.seq_id, p.num_cached))
            for p in out.prefills
        ]
        return out


@dataclass(frozen=True)
class StepRecord:
    """One engine step as the step-through widget draws it."""

    step: int
    running: list[int]
    waiting: list[int]
    preempted: list[int]
    finished: list[int]
    prefills: dict[int, tuple[int, int]]  # seq -> (tokens prefilled, of which cached)
    decodes: list[int]
    copies: list[tuple[int, int]]
    reads: dict[int, list[tuple[int, int]]]  # seq -> the slots its attention read, in order
    blocks: Any  # a servelab.viz.blocks.BlockSnapshot after the step
    tokens: dict[int, list[int]] = field(default_factory=dict)  # seq -> generated so far


class EngineSkeleton(Engine):
    """The reference engine run by ``block_manager_class`` and ``scheduler_class``.

    Subclass it, set the two classes, and write :meth:`execute`. ``record=True`` keeps a
    :class:`StepRecord` per step in ``records`` (for the step-through widget).
    """

    block_manager_class: ClassVar[Any] = None
    scheduler_class: ClassVar[Any] = None

    def __init__(
        self,
        model: TinyLlama,
        *,
        num_blocks: int = 64,
        block_size: int = 4,
        watermark: int = 1,
        backend: Backend | None = None,
        record: bool = False,
    ) -> None:
        cls = type(self)
        if cls.block_manager_class is None or cls.scheduler_class is None:
            raise TypeError(
                f"{cls.__name__} needs block_manager_class and scheduler_class: set both in "
                "the class body"
            )
        # The reference parts the base class builds are replaced below; watermark 0 is always
        # valid for them, the learner's scheduler gets the real one.
        config = EngineConfig(num_blocks, block_size, prefix_caching=False, watermark=0)
        super().__init__(model, config if backend is None else _with_backend(config, backend))
        self.blocks = LearnerBlocks(cls.block_manager_class(num_blocks, block_size), self._tokens)
        learner = cls.scheduler_class(self.blocks, watermark=watermark)
        self.learner_scheduler = LearnerScheduler(learner, self.blocks)
        # The engine reads only step, add, fork, running and is_idle of its scheduler, and
        # block_table and seq_len of its block manager: the adapters have all of them.
        self.scheduler = cast(Scheduler, self.learner_scheduler)
        self.bm = cast(Any, self.blocks)
        self.ledger = SlotLedger(block_size)
        self.record = record
        self.records: list[StepRecord] = []
        self.prefix_hits = 0  # prefills that found at least one cached block
        self._copies: list[tuple[int, int]] = []
        self._asked: list[tuple[int, int]] = []  # the copies this step's append_slot asked for
        self._reads: dict[int, list[tuple[int, int]]] = {}
        self._handed_rows: list[tuple[str, list[int], Rows]] = []  # (helper, seq ids, rows)

    def _tokens(self, seq_id: int) -> list[int]:
        return self._seqs[seq_id].token_ids

    # -- what the learner writes ---------------------------------------------------------
    def execute(self, out: StepOutput) -> Rows:
        """Carry out ``out`` on the device; return one ``(sequence, logits)`` per sequence
        that samples a token (every prefill, its forks, every decode)."""
        raise NotImplementedError("execute")

    # -- the helpers execute calls --------------------------------------------------------
    def copy(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Copy whole blocks, ``(src, dst)`` each, in one batched copy."""
        pairs = [(int(s), int(d)) for s, d in pairs]
        asked = self._asked
        if pairs and all((d, s) in asked and (s, d) not in asked for s, d in pairs):
            raise ExecuteError(
                f"execute copied {pairs}: each pair is a copy this step's append_slot asked for, "
                "reversed; copy takes (source, destination) pairs, (d.slot.cow_src, "
                f"d.slot.block), here {[(s, d) for s, d in asked]}"
            )
        try:
            self.pool.copy_blocks(pairs)
        except InvalidBlock as exc:  # about the pairs execute built: said against the step's
            raise ExecuteError(
                f"execute copied {pairs}: {exc}; this step's append_slot asked for the copies "
                f"(d.slot.cow_src, d.slot.block) {[(s, d) for s, d in asked]}"
            ) from None
        self.ledger.copy(pairs)
        self._copies += pairs

    def decode(self, decodes: Seq[Decode]) -> Rows:
        """Every decode in one batch: each writes its newest token's KV, then attends."""
        return self._handed("decode", self._decode_rows(decodes))

    def prefill(self, p: Prefill) -> Rows:
        """One prefill, skipping the ``num_cached`` tokens found in the prefix cache; a
        request with ``n > 1`` samples is forked right after its first prefill."""
        return self._handed("prefill", self._prefill_rows(p))

    def _handed(self, what: str, rows: Rows) -> Rows:
        """Note the rows a helper hands to execute, as handed, to say later what became of them."""
        self._handed_rows.append((what, [s.seq_id for s, _ in rows], rows))
        return rows

    def _decode_rows(self, decodes: Seq[Decode]) -> Rows:
        if not decodes:
            return []
        tables = [self.blocks.block_table(d.seq.seq_id) for d in decodes]
        lens = [self.blocks.seq_len(d.seq.seq_id) for d in decodes]
        batch = []
        for d, table, n in zip(decodes, tables, lens, strict=True):
            self._check_length(d.seq, n, table, "decode")
            slot = d.slot
            returned = (int(slot[0]), int(slot[1])) if slot is not None else None
            batch.append((d.seq.seq_id, d.seq.token_ids[:n], table, returned))
            self._reads[d.seq.seq_id] = [self.ledger._slot(table, p) for p in range(n)]
        self.ledger.decode(batch, self.blocks.tables())
        tokens = [d.seq.token_ids[n - 1] for d, n in zip(decodes, lens, strict=True)]
        self.stats.decode_tokens += len(tokens)
        logits = self.model.decode(self.pool, tokens, tables, lens, backend=self.config.backend)
        return [(d.seq, logits[i]) for i, d in enumerate(decodes)]

    def _prefill_rows(self, p: Prefill) -> Rows:
        seq, n, cached = p.seq, p.num_tokens, p.num_cached
        table = self.blocks.block_table(seq.seq_id)
        self._check_length(seq, n, table, "prefill")
        self.ledger.prefill(seq.seq_id, seq.token_ids[:n], table, cached, self.blocks.tables())
        self._reads[seq.seq_id] = [self.ledger._slot(table, q) for q in range(n)]
        logits = self.model.prefill(self.pool, seq.token_ids[:n], table, start=cached)
        self.stats.prompt_tokens += n
        self.stats.cached_tokens += cached
        self.prefix_hits += cached > 0
        rows: Rows = [(seq, logits)]
        sample = self._samples[seq.seq_id]
        group = self._groups[sample.request_id]
        if not group.forked and sample.index == 0:
            group.forked = True
            for i in range(1, group.request.n):
                child = Sequence(
                    self._next_seq, list(seq.token_ids), seq.prompt_len, seq.max_new_tokens
                )
                self._next_seq += 1
                self._seqs[child.seq_id] = child
                self.learner_scheduler.fork(seq, child)
                self._samples[child.seq_id] = _Sample(
                    sample.request_id, i, sample.seed + i, sample.temperature
                )
                group.seqs.append(child)
                self.stats.forks += 1
                rows.append((child, logits))
        return rows

    def _check_length(self, seq: Sequence, n: int, table: list[int], what: str) -> None:
        """A computed sequence has a slot for each of its tokens, in a table just long enough."""
        size = self.blocks.block_size
        if n == len(seq.token_ids) and len(table) == -(-n // size):
            return
        last = (table[(n - 1) // size], (n - 1) % size) if 0 < n <= len(table) * size else (-1, -1)
        raise KVDivergence(
            "length",
            step=self.ledger.step,
            seq=seq.seq_id,
            position=n - 1,
            slot=last,
            what=what,
            detail=(
                f"it has {len(seq.token_ids)} tokens, but this {what} covers {n}: its last slot "
                f"is slot (block {last[0]}, offset {last[1]}), for position {n - 1} (its block "
                f"manager holds seq_len = {self.blocks.seq_len(seq.seq_id)} and the table "
                f"{table}, blocks of {size}); every token of a computed sequence needs a slot "
                "(a recompute prefills prompt + generated)"
            ),
        )

    # -- one step ------------------------------------------------------------------------
    def step(self) -> int:
        """One step: the learner's scheduler decides, ``execute`` carries it out, one token
        is sampled per row; then every running sequence must still hold its own KV."""
        t0 = time.perf_counter()
        self.ledger.step = self.stats.steps + 1
        self._copies = []
        self._reads = {}
        self._handed_rows = []
        out = self.learner_scheduler.step()
        self._asked = _asked(out)
        try:
            rows = self.execute(out)
        except KVDivergence as exc:
            note = self._copies_note(out)
            if note:
                exc.note(note)
            raise
        self._check_rows(out, rows)
        tokens = self._sample(rows)
        for (seq, _), tok in zip(rows, tokens, strict=True):
            seq.append_token(tok)
        self._check_held()
        if self.record:
            self.records.append(self._record(out))
        self._collect_finished()
        self._account(out, len(self._copies))
        self.stats.generated_tokens += len(tokens)
        self.stats.wall_s += time.perf_counter() - t0
        return len(tokens)

    def _copies_note(self, out: StepOutput) -> str:
        asked = _asked(out)

        def pairs(items: list[tuple[int, int]]) -> str:
            return ", ".join(f"block {s} -> {d}" for s, d in items) or "none"

        if not asked and not self._copies:
            return ""
        onto_itself = [(s, d) for s, d in asked if s == d]  # a fact, whatever the cause
        return (
            f"in this step, append_slot asked for copy-on-write copies: {pairs(asked)}; "
            f"execute had copied before this read: {pairs(self._copies)}"
        ) + (
            f"; a copy of a block onto itself ({pairs(onto_itself)}) copies nothing: a copy's "
            "source is the shared block the sequence held"
            if onto_itself
            else ""
        )

    def _check_rows(self, out: StepOutput, rows: Any) -> None:
        if not isinstance(rows, list) or not all(
            isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], Sequence) for r in rows
        ):
            raise ExecuteError("execute must return a list of (sequence, logits) pairs")
        want = sorted(s.seq_id for s in out.computed())
        got = sorted(s.seq_id for s, _ in rows)
        stray = [s for s in sorted(set(got) - set(want)) if self._samples[s].index == 0]
        twice = sorted({s for s in got if got.count(s) > 1})
        if twice or stray or not set(want) <= set(got):
            decodes = sorted(d.seq.seq_id for d in out.decodes)
            prefills = sorted(p.seq.seq_id for p in out.prefills)
            wrong = [
                f"no row for the {what} of sequence(s) {missing}"
                for what, seqs in (("decode", decodes), ("prefill", prefills))
                if (missing := [s for s in seqs if s not in got])
            ]
            wrong += [f"sequence(s) {twice} more than once"] if twice else []
            wrong += (
                [f"rows for sequence(s) {stray}, which this step does not compute"] if stray else []
            )
            raise ExecuteError(
                f"execute returned rows for sequences {got}; this step decodes {decodes} and "
                f"prefills {prefills} (and the forks of a first prefill), each exactly once: "
                + "; ".join(wrong)
                + self._replaced_note(rows, set(want) - set(got))
            )

    def _replaced_note(self, rows: Rows, missing: set[int]) -> str:
        """When execute returned, as it was handed, the very list its last helper call
        returned, while an earlier call in this step had handed it rows now missing."""
        if not self._handed_rows or not missing:
            return ""
        what, ids, last = self._handed_rows[-1]
        if rows is not last or [s.seq_id for s, _ in rows] != ids:
            return ""
        dropped = [(name, sorted(set(seqs) & missing)) for name, seqs, _ in self._handed_rows[:-1]]
        dropped = [(name, seqs) for name, seqs in dropped if seqs]
        if not dropped:
            return ""
        earlier = ", ".join(f"{name} for sequence(s) {seqs}" for name, seqs in dropped)
        return (
            f". The list execute returned is the one its last helper call, {what}, returned "
            f"(rows for {ids}), unchanged; the rows handed earlier in this step ({earlier}) "
            "are not in it: each call's rows are added to the step's rows, not put in their place"
        )

    def _check_held(self) -> None:
        """Every running sequence's slots, after the step, still hold its own tokens' KV."""
        tables = self.blocks.tables()
        held = []
        for seq in self.learner_scheduler.running:
            n = self.blocks.seq_len(seq.seq_id)
            held.append((seq.seq_id, seq.token_ids[:n], tables[seq.seq_id]))
        self.ledger.check_held(held, tables)

    def _record(self, out: StepOutput) -> StepRecord:
        from servelab.viz.blocks import snapshot

        sched = self.learner_scheduler
        return StepRecord(
            step=self.ledger.step,
            running=[s.seq_id for s in sched.running],
            waiting=[s.seq_id for s in sched.waiting],
            preempted=[s.seq_id for s in out.preempted],
            finished=[s.seq_id for s in out.finished],
            prefills={p.seq.seq_id: (p.num_tokens, p.num_cached) for p in out.prefills},
            decodes=[d.seq.seq_id for d in out.decodes],
            copies=_asked(out),
            reads=dict(self._reads),
            blocks=snapshot(self.blocks.bm, caption=f"after step {self.ledger.step}"),
            tokens={
                s.seq_id: list(s.token_ids[s.prompt_len :]) for s in [*sched.running, *out.finished]
            },
        )


def _asked(out: StepOutput) -> list[tuple[int, int]]:
    """The copy-on-write copies ``(cow_src, block)`` this step's append_slot asked for."""
    return [
        (int(d.slot.cow_src), int(d.slot.block))
        for d in out.decodes
        if d.slot is not None and d.slot.cow_src is not None
    ]


def _with_backend(config: EngineConfig, backend: Backend) -> EngineConfig:
    from dataclasses import replace

    return replace(config, backend=backend)
