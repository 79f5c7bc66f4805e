"""The scheduler step: watermark admission, oldest-first decode, preempt the newest.

A :class:`Scheduler` sits on a :class:`~servelab.kv.blocks.BlockManager` and decides, once per
step, which sequences the engine computes. It keeps two queues: ``running`` (oldest first: the
order sequences were admitted) and ``waiting`` (the next to admit first). One call to
:meth:`Scheduler.step` does three things, in this order:

1. **Retire.** Every running sequence that has generated ``max_new_tokens`` is dropped and its
   blocks are freed.
2. **Decode.** Every running sequence, oldest first, reserves the slot of one token: one
   ``append_slots`` call for the whole step, which changes nothing if the step does not fit;
   then one ``append_slot`` at a time. When a block is needed and none is free, the *newest*
   running sequence is preempted (which may be the one that asked) and the append is
   retried. Preempting the newest protects the sequences that have made the most progress;
   preempting whoever happened to hit the error would starve long requests instead.
3. **Admit.** First come, first served, while the free blocks left *after* the admission stay
   at or above ``watermark``. The watermark keeps a few blocks for next step's decodes; without
   it an admission that fills the pool guarantees a preemption on the next step, at times of the
   sequence just admitted, whose prefill is then wasted (thrashing). In a step that preempted,
   admission takes nobody: the head of ``waiting`` is then the last victim, which needs at
   least the blocks it gave back, and the decode that forced the preemption has taken one of
   them.

Preemption is by **recompute** by default, as in vLLM: the victim's blocks are freed and it goes
back to the *front* of ``waiting`` with every token it has (prompt + generated), so the next
prefill rebuilds its whole KV cache and no output is lost. The **swap** option copies the
victim's blocks to a pool of host blocks instead (``StepOutput.swap_out``) and brings them back
on admission (``StepOutput.swap_in``); when the host pool is full it falls back to recompute.

Token accounting, which the engine relies on: a prefill of ``n`` tokens computes the KV of
``token_ids[:n]`` and samples one token; a decode writes the KV of the sequence's last token into
the returned slot and samples one token. The engine appends every sampled token with
:meth:`Sequence.append_token` before the next ``step()``, so between steps a running sequence
always holds KV slots for all of its tokens but the newest. :meth:`Scheduler.add` rejects a
request whose ``prompt + max_new_tokens`` tokens need more than ``num_blocks - watermark``
blocks: it could be preempted at a length it can never be readmitted at, and would wait forever.
(The last sampled token never needs a slot, so the rule is conservative by one token, and plain.)

The block manager is anything with the :class:`KVCacheManager` surface: the plain
:class:`~servelab.kv.blocks.BlockManager` or the
:class:`~servelab.kv.prefix.PrefixCachingBlockManager`. The scheduler hands it a sequence's
token ids (``allocate(seq_id, token_ids)``, ``append_slots(seq_ids, token_ids)``); a prefix cache
answers how many leading tokens it already holds, and the :class:`Prefill` says so.

Every queue operation is O(1) (deque ends, list tail, dict lookups); a step costs O(running +
admitted + blocks moved). No list is searched for membership.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from operator import attrgetter
from typing import Literal, NamedTuple

from servelab.kv.blocks import (
    InvalidLength,
    OutOfBlocks,
    Slot,
    UnknownSequence,
    check_token_ids,
    new_slot,
)
from servelab.kv.host_pool import HostBlockPool
from servelab.kv.scheduler_contract import (
    DuplicateSequence,
    InvalidRequest,
    InvalidSchedulerConfig,
    KVCacheManager,
    NotASequence,
    RequestTooLarge,
    SchedulerError,
    SequenceFinished,
    StepFailed,
    TokenNotAppended,
)
from servelab.native import mypyc_attr

__all__ = [
    "Decode",
    "DuplicateSequence",
    "HostBlockPool",
    "InvalidRequest",
    "InvalidSchedulerConfig",
    "KVCacheManager",
    "NotASequence",
    "Preemption",
    "Prefill",
    "RequestTooLarge",
    "Scheduler",
    "SchedulerError",
    "Sequence",
    "SequenceFinished",
    "StepFailed",
    "StepOutput",
    "TokenNotAppended",
    "default_watermark",
]

Preemption = Literal["recompute", "swap"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Compiled (servelab.native), a native class: the step reads its fields as C slots, not by
# name. Equality is identity: two requests with the same tokens are still two requests.
class Sequence:
    """One request being served: its token ids so far and how many new tokens it may generate.

    ``token_ids`` starts as the prompt and grows by one sampled token per computed step. The
    ids are dummies in simulations; prefix caching and the engine read the real ones.
    """

    seq_id: int
    token_ids: list[int]
    prompt_len: int
    max_new_tokens: int
    # The token count the scheduler that gave it KV slots expects at its next step (one more
    # than the slots), or 0 where none noted it: that step then asks the block manager.
    _next_len: int

    def __init__(
        self, seq_id: object, token_ids: object, prompt_len: object, max_new_tokens: object
    ) -> None:
        # The arguments are typed ``object`` and narrowed by the checks: compiled, an ``int``
        # parameter that gets a str raises mypyc's plain TypeError before a check names it.
        if not isinstance(seq_id, int) or isinstance(seq_id, bool):
            raise InvalidRequest(f"seq_id must be an int, got {seq_id!r}")
        if not isinstance(token_ids, list) or not all(_is_int(t) for t in token_ids):
            raise InvalidRequest("token_ids must be a list of ints")
        if (
            not isinstance(prompt_len, int)
            or isinstance(prompt_len, bool)
            or not 1 <= prompt_len <= len(token_ids)
        ):
            raise InvalidRequest(
                f"prompt_len must be an int in [1, {len(token_ids)}] (the prompt cannot be "
                f"empty), got {prompt_len!r}"
            )
        if (
            not isinstance(max_new_tokens, int)
            or isinstance(max_new_tokens, bool)
            or max_new_tokens < 1
        ):
            raise InvalidRequest(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
        if len(token_ids) - prompt_len > max_new_tokens:
            raise InvalidRequest(
                f"sequence {seq_id} already holds {len(token_ids) - prompt_len} generated "
                f"tokens, more than max_new_tokens={max_new_tokens}"
            )
        self.seq_id = seq_id
        self.token_ids = token_ids
        self.prompt_len = prompt_len
        self.max_new_tokens = max_new_tokens
        self._next_len = 0

    @classmethod
    def from_prompt(cls, seq_id: int, prompt: Iterable[int], max_new_tokens: int) -> Sequence:
        """A new request whose prompt is ``prompt``."""
        ids = list(prompt)
        return cls(seq_id, ids, len(ids), max_new_tokens)

    @classmethod
    def dummy(cls, seq_id: int, prompt_len: int, max_new_tokens: int) -> Sequence:
        """A request with placeholder token ids (all equal to ``seq_id``, so two different
        sequences never share a prefix by accident), for simulations and tests."""
        if not _is_int(prompt_len) or prompt_len < 1:
            raise InvalidRequest(f"prompt_len must be a positive int, got {prompt_len!r}")
        return cls(seq_id, [seq_id] * prompt_len, prompt_len, max_new_tokens)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: what a recompute prefill must rebuild."""
        return len(self.token_ids)

    @property
    def num_generated(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def is_finished(self) -> bool:
        return self.num_generated >= self.max_new_tokens

    @property
    def max_len(self) -> int:
        """Prompt + max_new_tokens: the length admission control sizes a request by. (Its KV
        never needs the last sampled token's slot; counting it anyway keeps the rule plain.)"""
        return self.prompt_len + self.max_new_tokens

    def append_token(self, token_id: object) -> None:
        """Record one sampled token (the engine calls this after computing the step). The id
        is checked here, so a scheduler never hands its block manager a bad one. (Typed
        ``object``: compiled, an ``int`` argument would turn a bool into an int unchecked.)"""
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise InvalidRequest(f"a token id must be a non-negative int, got {token_id!r}")
        if len(self.token_ids) - self.prompt_len >= self.max_new_tokens:  # is_finished
            raise SequenceFinished(
                f"sequence {self.seq_id} has already generated its {self.max_new_tokens} tokens"
            )
        self.token_ids.append(token_id)

    def __reduce__(self) -> tuple[type[Sequence], tuple[int, list[int], int, int]]:
        # How copy and pickle rebuild it (through __init__, so a copy is checked too):
        # compiled, a native class has no __dict__ for them to copy.
        return (type(self), (self.seq_id, self.token_ids, self.prompt_len, self.max_new_tokens))

    def __repr__(self) -> str:
        return (
            f"Sequence({self.seq_id}, prompt={self.prompt_len}, "
            f"generated={self.num_generated}/{self.max_new_tokens})"
        )


class Prefill(NamedTuple):
    """Compute the KV of ``seq.token_ids[:num_tokens]`` into the sequence's blocks, then sample
    one token. ``num_tokens`` is prompt + generated: a recompute rebuilds everything. The first
    ``num_cached`` tokens already hold KV in the prefix cache: skip computing them."""

    seq: Sequence
    num_tokens: int
    num_cached: int = 0


class Decode(NamedTuple):
    """Write the KV of ``seq``'s last token at ``slot`` (copying ``slot.cow_src`` into
    ``slot.block`` first when it is set), then sample one token."""

    seq: Sequence
    slot: Slot


class StepOutput:
    """What one step decided, in the order the engine must execute it.

    1. ``swap_out`` copies (GPU block -> host block), before anything else: the GPU blocks
       they read from were freed in this step and may already be reused below;
    2. ``swap_in`` copies (host block -> GPU block) for the sequences in ``swapped_in``;
    3. the copy-on-write copies named by ``decodes[i].slot.cow_src``;
    4. the model over ``decodes``, then over ``prefills`` in order: a block that a decode's
       token fills is in the prefix cache already, and a prompt of this step may hit it, so
       its KV must be written before any prefill reads it;
    5. one sampled token appended to each sequence of :meth:`computed`.

    ``preempted`` lists victims in the order they were chosen (newest first); ``finished``
    lists sequences retired at the start of this step, whose blocks are already free.

    A step that decodes in one block-manager call keeps that call's answer (the sequences,
    their flat slots and the copy-on-write copies) and builds ``decodes``, a ``Decode`` and a
    ``Slot`` per sequence, when ``decodes`` is first read: a caller that needs only
    :meth:`computed` never pays for them. Reading it gives the same list every time.
    """

    prefills: list[Prefill]
    preempted: list[Sequence]
    finished: list[Sequence]
    swapped_in: list[Sequence]
    swap_out: list[tuple[int, int]]
    swap_in: list[tuple[int, int]]

    def __init__(
        self,
        prefills: list[Prefill] | None = None,
        decodes: list[Decode] | None = None,
        preempted: list[Sequence] | None = None,
        finished: list[Sequence] | None = None,
        swapped_in: list[Sequence] | None = None,
        swap_out: list[tuple[int, int]] | None = None,
        swap_in: list[tuple[int, int]] | None = None,
    ) -> None:
        self.prefills = [] if prefills is None else prefills
        self._decodes: list[Decode] = [] if decodes is None else decodes
        self.preempted = [] if preempted is None else preempted
        self.finished = [] if finished is None else finished
        self.swapped_in = [] if swapped_in is None else swapped_in
        self.swap_out = [] if swap_out is None else swap_out
        self.swap_in = [] if swap_in is None else swap_in
        # A one-call decode step that ``decodes`` is not built from yet (None: there is none)
        self._batch: list[Sequence] | None = None
        self._slots: list[int] = []
        self._copies: list[tuple[int, int]] = []
        self._block_size = 1

    @property
    def decodes(self) -> list[Decode]:
        """The decoded sequences, oldest first, each with the slot of its new token."""
        if self._batch is not None:
            self._build_decodes()
        return self._decodes

    @decodes.setter
    def decodes(self, decodes: list[Decode]) -> None:
        self._batch = None
        self._decodes = decodes

    def _set_decode_step(
        self, seqs: list[Sequence], slots: list[int], copies: list[tuple[int, int]], size: int
    ) -> None:
        """Keep a decode step (``seqs[i]`` writes at flat slot ``slots[i]``) to build from."""
        if self._batch is not None:
            self._build_decodes()
        self._batch, self._slots, self._copies, self._block_size = seqs, slots, copies, size

    def _build_decodes(self) -> None:
        seqs, size = self._batch, self._block_size
        assert seqs is not None
        self._batch = None
        copied_from = {dst: src for src, dst in self._copies}.get
        # ``new_slot`` builds a named tuple without its Python-level ``__new__``
        make, decode, slot_type = new_slot, Decode, Slot
        self._decodes += [
            make(
                decode,
                (seq, make(slot_type, (slot // size, slot % size, copied_from(slot // size)))),
            )
            for seq, slot in zip(seqs, self._slots, strict=True)
        ]
        self._slots, self._copies = [], []

    def computed(self) -> list[Sequence]:
        """The sequences that sample a token in this step: prefills, then decodes."""
        # ``[0]`` is ``.seq``: an index, faster in both builds than a named field's lookup
        seqs = [p[0] for p in self.prefills]
        if self._decodes:
            seqs += [d[0] for d in self._decodes]
        if self._batch is not None:
            seqs += self._batch
        return seqs

    # Compared and shown as the dataclass it was: every field, ``decodes`` built
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepOutput) or type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _STEP_FIELDS)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _STEP_FIELDS)
        return f"{type(self).__name__}({fields})"


_STEP_FIELDS = ("prefills", "decodes", "preempted", "finished", "swapped_in", "swap_out", "swap_in")


def default_watermark(num_blocks: int) -> int:
    """vLLM's default: 1% of the pool, at least one block (and never the whole pool)."""
    if not _is_int(num_blocks) or num_blocks < 1:
        raise InvalidSchedulerConfig(f"num_blocks must be a positive int, got {num_blocks!r}")
    return min(max(1, num_blocks // 100), num_blocks - 1)


_next_len = attrgetter("_next_len")


class _Undo:
    """The state before a step, for undoing it: the block manager's snapshot, the running
    list (the object, its contents and their noted lengths), the other queues, and the noted
    lengths of the sequences admitted so far in the step."""

    def __init__(self, sched: Scheduler, bm: object) -> None:
        self.bm = bm
        self.running = sched.running
        self.running_contents = sched.running[:]
        self.next_lens = list(map(_next_len, sched.running))
        self.waiting = list(sched.waiting)
        self.swapped = dict(sched._swapped)
        self.host_free = list(sched.host._free)
        self.admitted: list[tuple[Sequence, int]] = []


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class Scheduler:
    """Admit, decode and preempt over a block manager, one :meth:`step` at a time.

    ``watermark`` is a block count (default: :func:`default_watermark`, 1% of the pool).
    ``preemption="swap"`` with ``num_host_blocks > 0`` swaps victims to host blocks while the
    host pool has room, and recomputes otherwise.
    """

    def __init__(
        self,
        bm: KVCacheManager,
        *,
        watermark: object = None,
        preemption: Preemption = "recompute",
        num_host_blocks: int = 0,
    ) -> None:
        if watermark is None:
            watermark = default_watermark(bm.num_blocks)
        if (
            not isinstance(watermark, int)
            or isinstance(watermark, bool)
            or not 0 <= watermark < bm.num_blocks
        ):
            raise InvalidSchedulerConfig(
                f"watermark must be an int block count in [0, {bm.num_blocks}) for a pool of "
                f"{bm.num_blocks} blocks, got {watermark!r}"
            )
        if preemption not in ("recompute", "swap"):
            raise InvalidSchedulerConfig(
                f"preemption must be 'recompute' or 'swap', got {preemption!r}"
            )
        self.bm: KVCacheManager = bm
        self.watermark: int = watermark
        self.preemption: Preemption = preemption
        self.host = HostBlockPool(num_host_blocks)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._live: dict[int, Sequence] = {}
        self._swapped: dict[int, list[int]] = {}  # seq id -> its host blocks, in table order
        self._undo: _Undo | None = None  # the state before this step, while one may need it

    # ------------------------------------------------------------------ queries
    @property
    def is_idle(self) -> bool:
        """Nothing running and nothing waiting."""
        return not self.running and not self.waiting

    def sequence(self, seq_id: int) -> Sequence:
        """The live (waiting or running) sequence with this id."""
        try:
            return self._live[seq_id]
        except KeyError:
            raise UnknownSequence(f"sequence {seq_id} is not waiting or running") from None

    def is_swapped(self, seq_id: int) -> bool:
        """Whether the waiting sequence ``seq_id`` has its KV cache in host blocks."""
        return seq_id in self._swapped

    def max_request_blocks(self) -> int:
        """The largest KV cache, in blocks, that :meth:`add` accepts."""
        return self.bm.num_blocks - self.watermark

    # ---------------------------------------------------------------- mutations
    def add(self, seq: object) -> None:
        """Queue ``seq`` at the back of ``waiting``.

        Raises NotASequence for a non-Sequence, InvalidRequest for a finished one or one
        with a token id that is not a non-negative int, DuplicateSequence for an id already
        in use and RequestTooLarge for a request that could never run. Nothing changes when
        it raises. Ids are checked here, where they enter (and by ``append_token``), so that
        ``step`` never hands the block manager one it refuses halfway through a step.
        """
        if not isinstance(seq, Sequence):
            raise NotASequence(f"add() takes a Sequence, got {type(seq).__name__}")
        if seq.is_finished:
            raise InvalidRequest(f"sequence {seq.seq_id} has nothing left to generate")
        try:
            check_token_ids(seq.token_ids)
        except InvalidLength as exc:
            raise InvalidRequest(f"sequence {seq.seq_id}: {exc}") from None
        if seq.seq_id in self._live or self._held_by_block_manager(seq.seq_id):
            raise DuplicateSequence(f"sequence id {seq.seq_id} is already in use")
        need = self.bm.blocks_needed(seq.max_len)
        if need > self.max_request_blocks():
            raise RequestTooLarge(
                f"sequence {seq.seq_id} needs up to {need} blocks ({seq.prompt_len} prompt + "
                f"{seq.max_new_tokens} new tokens, {self.bm.block_size} per block) but a "
                f"pool of {self.bm.num_blocks} with watermark {self.watermark} can give at "
                f"most {self.max_request_blocks()}; it would be preempted forever"
            )
        self.waiting.append(seq)
        self._live[seq.seq_id] = seq

    def fork(self, parent: object, child: object) -> None:
        """Make ``child`` a running copy of the running ``parent`` that shares all its blocks
        (parallel sampling, beam search). The child joins ``running`` as its newest member;
        copy-on-write happens in the block manager at the first append into a shared block.

        Raises NotASequence if either is not a Sequence, UnknownSequence if ``parent`` is not
        running, DuplicateSequence if the child's id is in use and InvalidRequest if the
        child's tokens differ from the parent's or it has nothing left to generate. Nothing
        changes when it raises.
        """
        if not isinstance(parent, Sequence) or not isinstance(child, Sequence):
            name, arg = ("child", child) if isinstance(parent, Sequence) else ("parent", parent)
            raise NotASequence(
                f"fork() takes two Sequences; the {name} is {type(arg).__name__} {arg!r}"
            )
        if self._live.get(parent.seq_id) is not parent or not self._held_by_block_manager(
            parent.seq_id
        ):
            raise UnknownSequence(f"sequence {parent.seq_id} is not running; fork a running one")
        if child.seq_id in self._live or self._held_by_block_manager(child.seq_id):
            raise DuplicateSequence(f"sequence id {child.seq_id} is already in use")
        if child.token_ids != parent.token_ids or child.is_finished:
            raise InvalidRequest(
                f"a fork of sequence {parent.seq_id} must start with its {parent.num_tokens} "
                "tokens and have tokens left to generate"
            )
        self.bm.fork(parent.seq_id, child.seq_id)
        self.running.append(child)
        self._live[child.seq_id] = child

    def step(self) -> StepOutput:
        """Retire finished sequences, decode the running ones oldest first (preempting the
        newest when blocks run out), then admit from ``waiting``.

        All or nothing. It raises TokenNotAppended, changing nothing, when the previous
        step's sampled tokens were not all appended (checked before its first change).
        Everything else it hands the block manager was checked on the way in (``add``,
        ``fork``, ``Sequence.append_token``); a block manager that raises anyway (a prefix
        cache whose ``hash_algo`` callable fails, a sequence whose ``token_ids`` were changed
        other than through ``append_token``) gets the whole step undone, the queues, the
        sequences and the manager's tables, free list and counters as they were, and StepFailed
        with the manager's error as its cause. (The undo needs the manager's ``_snapshot`` and
        ``_restore``, which both reference managers have; with another manager its error is
        raised as it is, and the calls before it stay done.)
        """
        any_finished = self._check_tokens_appended()
        out = StepOutput()
        # A step that can call the block manager more than once keeps an undo point. One that
        # only decodes makes one call, all or nothing by itself, unless it must preempt:
        # then nothing has changed yet, and ``_decode_preempting`` takes it.
        if any_finished or self._may_admit():
            self._undo = self._save()
        try:
            if any_finished:
                self._retire(out)
            self._decode(out)
            self._admit(out)
        except BaseException as exc:
            undo, self._undo = self._undo, None
            if undo is not None:
                self._put_back(undo)
            if not isinstance(exc, Exception) or not hasattr(self.bm, "_restore"):
                raise
            error = StepFailed(
                f"step() failed with {type(exc).__name__}: {exc}; the step was undone, the "
                "queues and the block manager are as before it"
            )
            error.__cause__ = exc  # set by hand: compiled, ``raise ... from`` leaves it None
            raise error  # noqa: B904 (the cause is set above)
        self._undo = None
        return out

    # ----------------------------------------------------------------- all or nothing
    def _may_admit(self) -> bool:
        """Whether the head of ``waiting`` fits now. A step that retires nobody only takes
        blocks before it admits (or preempts, which keeps its own undo point), so a head that
        does not fit now is not admitted in this step."""
        if not self.waiting:
            return False
        seq = self.waiting[0]
        n_tokens = seq.num_tokens - 1 if seq.seq_id in self._swapped else seq.num_tokens
        return self.bm.num_free - self.bm.blocks_needed(n_tokens) >= self.watermark

    def _save(self) -> _Undo | None:
        """What a step may change, copied (None if the block manager cannot be restored).
        Only running sequences and admitted ones (noted by ``_admit``) get a new ``_next_len``;
        ``_live`` holds exactly the running and waiting ones, so it is rebuilt from them."""
        snapshot = getattr(self.bm, "_snapshot", None)
        if snapshot is None:
            return None
        return _Undo(self, snapshot())

    def _put_back(self, undo: _Undo) -> None:
        self.bm._restore(undo.bm)  # type: ignore[attr-defined]  # _save found it
        for seq, next_len in reversed(undo.admitted):
            seq._next_len = next_len
        for seq, next_len in zip(undo.running_contents, undo.next_lens, strict=True):
            seq._next_len = next_len
        undo.running[:] = undo.running_contents
        self.running = undo.running
        self.waiting.clear()
        self.waiting.extend(undo.waiting)
        self._live.clear()
        self._live.update((seq.seq_id, seq) for seq in (*self.running, *self.waiting))
        self._swapped.clear()
        self._swapped.update(undo.swapped)
        self.host._free.clear()
        self.host._free.extend(undo.host_free)

    # ----------------------------------------------------------------- the step
    def _check_tokens_appended(self) -> bool:
        """Raise TokenNotAppended unless every running sequence holds one token more than
        its KV slots; return whether any running sequence has finished (one pass for both).
        The count was noted when this scheduler gave the slots (``_next_len``), so the block
        manager is asked only for a sequence that has no note (a fork, a copy)."""
        any_finished = False
        for seq in self.running:
            tokens = seq.token_ids
            want = seq._next_len
            if want != len(tokens) and (want or self.bm.seq_len(seq.seq_id) != len(tokens) - 1):
                have = self.bm.seq_len(seq.seq_id)
                raise TokenNotAppended(
                    f"sequence {seq.seq_id} has {seq.num_tokens} tokens and {have} KV slots; "
                    "after a step, append exactly one sampled token to every sequence in "
                    "StepOutput.computed() before calling step() again"
                )
            if len(tokens) - seq.prompt_len >= seq.max_new_tokens:  # is_finished, inline
                any_finished = True
        return any_finished

    def _retire(self, out: StepOutput) -> None:
        still_running = []
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                del self._live[seq.seq_id]
                out.finished.append(seq)
            else:
                still_running.append(seq)
        self.running = still_running

    def _decode(self, out: StepOutput) -> None:
        running = self.running
        if not running:
            return
        bm = self.bm
        ids = [s.seq_id for s in running]
        try:  # the whole step in one call: a step that fits without a preemption
            step = bm.append_slots(ids, [s.token_ids[-1] for s in running])
        except OutOfBlocks:  # nothing changed: one at a time, preempting the newest
            self._decode_preempting(out)
            return
        for seq in running:
            seq._next_len = len(seq.token_ids) + 1
        # The Decode and Slot of each sequence are built only if ``out.decodes`` is read.
        out._set_decode_step(running[:], step.slots, step.copies, bm.block_size)

    def _decode_preempting(self, out: StepOutput) -> None:
        if self._undo is None:  # nothing has changed yet in this step: see step()
            self._undo = self._save()
        running = self.running
        i = 0
        while i < len(running):
            seq = running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id, seq.token_ids[-1])
            except OutOfBlocks:
                # Preempt the newest and retry. If the newest is ``seq`` itself, the loop
                # ends here because ``i == len(running)`` after the pop.
                self._preempt(running.pop(), out)
                continue
            out.decodes.append(Decode(seq, slot))
            seq._next_len = len(seq.token_ids) + 1
            i += 1

    def _preempt(self, victim: Sequence, out: StepOutput) -> None:
        out.preempted.append(victim)
        if not (self.preemption == "swap" and self._swap_out(victim, out)):
            self.bm.free_seq(victim.seq_id)  # recompute: prefill prompt + generated later
        self.waiting.appendleft(victim)

    def _swap_out(self, victim: Sequence, out: StepOutput) -> bool:
        table = self.bm.block_table(victim.seq_id)
        if len(table) > self.host.num_free:
            return False
        host_blocks = self.host.take(len(table))
        self.bm.free_seq(victim.seq_id)
        out.swap_out.extend(zip(table, host_blocks, strict=True))
        self._swapped[victim.seq_id] = host_blocks
        return True

    def _admit(self, out: StepOutput) -> None:
        bm = self.bm
        while self.waiting:
            seq = self.waiting[0]
            host_blocks = self._swapped.get(seq.seq_id)
            # A swapped sequence comes back with the KV it had; a recomputed one is prefilled
            # at its full length, prompt + generated.
            n_tokens = seq.num_tokens - 1 if host_blocks is not None else seq.num_tokens
            if bm.num_free - bm.blocks_needed(n_tokens) < self.watermark:
                break  # FCFS: nobody overtakes the head of the queue
            ids = seq.token_ids if host_blocks is None else seq.token_ids[:n_tokens]
            cached = bm.allocate(seq.seq_id, ids)  # first: if it raises, seq is still queued
            self.waiting.popleft()
            self.running.append(seq)
            if self._undo is not None:
                self._undo.admitted.append((seq, seq._next_len))
            seq._next_len = n_tokens + 1
            if host_blocks is None:
                out.prefills.append(Prefill(seq, n_tokens, cached))
            else:
                del self._swapped[seq.seq_id]
                # Blocks found in the prefix cache are shared and already hold this KV.
                hit = cached // bm.block_size
                table = bm.block_table(seq.seq_id)
                out.swap_in.extend(zip(host_blocks[hit:], table[hit:], strict=True))
                self.host.release(host_blocks)
                out.swapped_in.append(seq)

    def _held_by_block_manager(self, seq_id: int) -> bool:
        try:
            self.bm.seq_len(seq_id)
        except UnknownSequence:
            return False
        return True

    def __repr__(self) -> str:
        return (
            f"Scheduler(running={len(self.running)}, waiting={len(self.waiting)}, "
            f"free={self.bm.num_free}/{self.bm.num_blocks}, watermark={self.watermark})"
        )
