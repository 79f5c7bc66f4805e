"""The scheduler's rules as code: an executable model, per-step checks and a state machine.

Everything here reads only the learner-facing surface, so it grades any implementation:
``Scheduler(bm, watermark=w)``, ``add(seq)``, ``step() -> StepOutput``, ``waiting`` (next to
admit first) and ``running`` (oldest first), over the reference
:class:`~servelab.kv.blocks.BlockManager`.

:class:`SchedulerModel` executes the rules on plain counts (no block ids: without forks, a
sequence holding ``n`` KV slots holds ``ceil(n / block_size)`` blocks, whichever they are).
:func:`compare_step` checks one ``step()`` against it and names the rule that broke first, so
a failure maps to a hint about that rule; :func:`check_scheduler_invariants` checks the rules
that hold between steps. :func:`scheduler_machine` drives both from Hypothesis, at three stages that
match the notebook: admission only (one step), admission + decode + retirement in a pool that
never runs out, and the full step with preemption.
"""

from __future__ import annotations

import copy
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from servelab.kv.blocks import BlockManager, OutOfBlocks
from servelab.kv.scheduler import RequestTooLarge, Sequence, StepOutput
from servelab.kv.sim import emit_tokens
from servelab.testing import block_manager as bm_checks
from servelab.testing.core import InvariantViolation, RecordingMachine
from servelab.testing.scheduler_cached import check_prefill_cached

__all__ = [
    "INVARIANTS",
    "ModelOutput",
    "QueueState",
    "SchedulerModel",
    "check_scheduler_invariants",
    "check_step_rules",
    "compare_step",
    "liveness_bound",
    "run_until_idle",
    "scheduler_machine",
]

# Stable ids of the rules, in the order the notebook teaches them.
INVARIANTS: dict[str, str] = {
    "too-large": "add() raises RequestTooLarge exactly for requests that can never fit",
    "fits-answer": "fits(n) is true exactly when allocating n tokens leaves `watermark` blocks "
    "free, and changes nothing",
    "fcfs": "admission is first come, first served and stops only at a request that won't fit",
    "watermark": "admission leaves at least `watermark` free blocks",
    "prefill-length": "a prefill covers every token the sequence has (prompt + generated)",
    "finished-freed": "a finished sequence leaves running and its blocks are freed",
    "decode-order": "every running sequence decodes one token per step, oldest first",
    "retire-early": "a sequence is retired only once it has generated all its tokens",
    "decode-then-admit": "a step decodes the running sequences first, then admits",
    "victim-newest": "on OutOfBlocks the newest running sequence is preempted",
    "requeue-front": "a preempted sequence goes back to the front of waiting",
    "requeue-length": "a preempted sequence keeps its generated tokens and is re-prefilled at "
    "prompt + generated",
    "kv-slots": "a running sequence holds KV slots for all its tokens but the newest; a "
    "waiting one holds none",
    "no-leak": "the free blocks are exactly those no live sequence needs",
    "liveness": "every request finishes within a bounded number of steps",
}


@dataclass
class ModelOutput:
    """The expected StepOutput, by sequence id."""

    prefills: list[tuple[int, int]] = field(default_factory=list)
    decodes: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)

    def computed(self) -> list[int]:
        return [sid for sid, _ in self.prefills] + self.decodes


@dataclass
class SchedulerModel:
    """The rules of one step, executed on token counts.

    ``stage`` 1 admits only; 2 also retires and decodes (and must never run out of blocks);
    3 adds preemption. ``tokens`` is every sequence's token count, ``kv`` the KV slots of each
    running one.
    """

    num_blocks: int
    block_size: int
    watermark: int
    stage: int = 3
    running: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    tokens: dict[int, int] = field(default_factory=dict)
    prompt: dict[int, int] = field(default_factory=dict)
    max_new: dict[int, int] = field(default_factory=dict)
    kv: dict[int, int] = field(default_factory=dict)

    def blocks(self, n_tokens: int) -> int:
        return -(-n_tokens // self.block_size)

    @property
    def num_free(self) -> int:
        return self.num_blocks - sum(self.blocks(n) for n in self.kv.values())

    def too_large(self, prompt_len: int, max_new_tokens: int) -> bool:
        return self.blocks(prompt_len + max_new_tokens) > self.num_blocks - self.watermark

    def finished(self, sid: int) -> bool:
        return self.tokens[sid] - self.prompt[sid] >= self.max_new[sid]

    def add(self, sid: int, prompt_len: int, max_new_tokens: int) -> None:
        self.tokens[sid] = self.prompt[sid] = prompt_len
        self.max_new[sid] = max_new_tokens
        self.waiting.append(sid)

    def step(self) -> ModelOutput:
        out = ModelOutput()
        if self.stage >= 2:
            for sid in self.running:
                if self.finished(sid):
                    out.finished.append(sid)
                    del self.kv[sid]
            self.running = [s for s in self.running if s not in out.finished]
            i = 0
            while i < len(self.running):
                sid = self.running[i]
                if self.kv[sid] % self.block_size == 0 and self.num_free == 0:
                    if self.stage < 3:
                        raise AssertionError("stage-2 workloads must never run out of blocks")
                    victim = self.running.pop()
                    del self.kv[victim]
                    self.waiting.insert(0, victim)
                    out.preempted.append(victim)
                    continue
                self.kv[sid] += 1
                out.decodes.append(sid)
                i += 1
        while self.waiting:
            sid = self.waiting[0]
            n = self.tokens[sid]
            if self.num_free - self.blocks(n) < self.watermark:
                break
            self.waiting.pop(0)
            self.kv[sid] = n
            self.running.append(sid)
            out.prefills.append((sid, n))
        return out

    def emit(self, out: ModelOutput) -> None:
        for sid in out.computed():
            self.tokens[sid] += 1

    def idle(self) -> bool:
        return not self.running and not self.waiting


def _ids(seqs: Iterable[Any]) -> list[int]:
    return [s.seq_id for s in seqs]


def compare_step(
    sched: Any,
    out: Any,
    want: ModelOutput,
    model: SchedulerModel,
    seqs: dict[int, Sequence],
    code: str = "sched.step()",
) -> None:
    """Check ``out`` (from ``sched.step()``) against the model's ``want``, rule by rule.

    ``model`` has already taken the step. Raises :class:`InvariantViolation` naming the first
    rule that differs, most specific first.
    """
    if not isinstance(out, StepOutput):
        raise InvariantViolation(
            "decode-order", f"`{code}` returned {out!r}; step() must return a StepOutput"
        )
    bm = sched.bm
    running = _ids(sched.running)
    waiting = _ids(sched.waiting)
    live_in_bm = set(bm.sequences())
    for sid in want.finished:
        if sid in running or sid in live_in_bm:
            raise InvariantViolation(
                "finished-freed",
                f"after `{code}`, sequence {sid} has generated all {model.max_new[sid]} of its "
                "tokens but is still " + ("running" if sid in running else "holding blocks"),
            )
    early = [sid for sid in _ids(out.finished) if sid not in want.finished]
    # a sequence the model retired in an earlier step: listed again, not retired early
    again = [
        sid
        for sid in early
        if sid in model.tokens
        and model.finished(sid)
        and sid not in model.running
        and sid not in model.waiting
    ]
    if again:
        made = ", ".join(
            f"{sid}: {model.tokens[sid] - model.prompt[sid]} of {model.max_new[sid]}"
            for sid in again
        )
        raise InvariantViolation(
            "finished-freed",
            f"`{code}` listed {again} in out.finished, retired in an earlier step ({made} "
            f"generated); out.finished lists only the sequences this step retires, expected "
            f"{want.finished}",
        )
    if early:
        made = ", ".join(
            f"{sid}: {model.tokens[sid] - model.prompt[sid]} of {model.max_new[sid]}"
            for sid in early
            if sid in model.tokens
        )
        raise InvariantViolation(
            "retire-early",
            f"`{code}` retired {early}, which had not generated all their tokens yet ({made})",
        )
    if _ids(out.finished) != want.finished:
        raise InvariantViolation(
            "finished-freed",
            f"`{code}` reported finished {_ids(out.finished)}; expected {want.finished}",
        )
    got_preempted = _ids(out.preempted)
    if got_preempted != want.preempted:
        raise InvariantViolation(
            "victim-newest",
            f"`{code}` preempted {got_preempted}; expected {want.preempted} (the newest "
            f"running first, only when a decode finds no free block)",
        )
    for sid in want.preempted:
        if seqs[sid].num_tokens != model.tokens[sid]:
            raise InvariantViolation(
                "requeue-length",
                f"after `{code}`, preempted sequence {sid} has {seqs[sid].num_tokens} tokens; "
                f"it had {model.tokens[sid]} (prompt + generated) and must keep them all",
            )
        if sid in live_in_bm:
            raise InvariantViolation(
                "kv-slots", f"after `{code}`, preempted sequence {sid} still holds blocks"
            )
    got_prefills = [(p.seq.seq_id, p.num_tokens) for p in out.prefills]
    for sid, n in got_prefills:
        want_n = model.tokens[sid]
        held = bm.seq_len(sid) if sid in live_in_bm else None
        if n != want_n or held != want_n:
            rule_id = "requeue-length" if want_n > model.prompt[sid] else "prefill-length"
            raise InvariantViolation(
                rule_id,
                f"`{code}` admitted sequence {sid} with a prefill of {n} tokens and {held} KV "
                f"slots; it has {want_n} tokens (prompt {model.prompt[sid]} + "
                f"{want_n - model.prompt[sid]} generated), and every one of them needs KV",
            )
    want_ids = [sid for sid, _ in want.prefills]
    got_ids = [sid for sid, _ in got_prefills]
    if got_ids != want_ids:
        if set(got_ids) - set(want_ids) and bm.num_free < model.watermark:
            raise InvariantViolation(
                "watermark",
                f"`{code}` admitted {got_ids}, leaving {bm.num_free} free blocks below the "
                f"watermark {model.watermark}; only {want_ids} fit above it",
            )
        raise InvariantViolation(
            "fcfs",
            f"`{code}` admitted {got_ids}; expected {want_ids} (first come, first served, "
            f"while the free blocks left after each admission stay >= watermark "
            f"{model.watermark})",
        )
    check_prefill_cached(out, model.prompt, code)
    if waiting != model.waiting:
        rule_id = "fcfs"
        if sorted(waiting) == sorted(model.waiting) and want.preempted:
            rule_id = "requeue-front"
        raise InvariantViolation(
            rule_id, f"after `{code}`, waiting is {waiting}; expected {model.waiting}"
        )
    got_decodes = [d.seq.seq_id for d in out.decodes]
    admitted_now = {sid for sid, _ in want.prefills}
    if admitted_now & set(got_decodes):
        raise InvariantViolation(
            "decode-then-admit",
            f"`{code}` decoded {sorted(admitted_now & set(got_decodes))}, admitted in this very "
            "step: a step decodes the sequences already running, then admits",
        )
    if got_decodes != want.decodes:
        raise InvariantViolation(
            "decode-order",
            f"`{code}` decoded {got_decodes}; expected {want.decodes} (each running sequence "
            "once, oldest first)",
        )
    for d in out.decodes:
        sid = d.seq.seq_id
        length = bm.seq_len(sid) if sid in live_in_bm else None
        slot = tuple(d.slot) if isinstance(d.slot, tuple) else d.slot  # a Slot, or not
        if length == model.kv[sid] and slot != _slot_of(bm, sid):
            raise InvariantViolation(
                "decode-order",
                f"`{code}` decoded sequence {sid} with slot {d.slot!r}; its append_slot gave "
                f"{_slot_of(bm, sid)} (block, offset, cow_src): a Decode carries the Slot that "
                "bm.append_slot returns",
            )
        if length != model.kv[sid]:
            raise InvariantViolation(
                "decode-order",
                f"`{code}` decoded sequence {sid} with slot {d.slot}; it should hold "
                f"{model.kv[sid]} slots after one append_slot (it holds {length})",
            )
    if running != model.running:
        raise InvariantViolation(
            "decode-order", f"after `{code}`, running is {running}; expected {model.running}"
        )


def _raised_in(exc: BaseException, method: str) -> bool:
    """Whether ``exc`` came out of the block manager's ``method``."""
    frames = traceback.extract_tb(exc.__traceback__)
    return any(f.name == method and f.filename.endswith("blocks.py") for f in frames)


def _slot_of(bm: BlockManager, sid: int) -> tuple[int, int, None]:
    n = bm.seq_len(sid)
    return (bm.block_table(sid)[-1], (n - 1) % bm.block_size, None)


def check_scheduler_invariants(sched: Any, model: SchedulerModel | None = None) -> None:
    """Between steps: block-manager invariants, queues, KV slots and (with a model) free count."""
    bm = sched.bm
    bm_checks.check_block_manager_invariants(bm)
    running = _ids(sched.running)
    waiting = _ids(sched.waiting)
    if len(set(running) | set(waiting)) != len(running) + len(waiting):
        raise InvariantViolation(
            "decode-order", f"a sequence is queued twice: running {running}, waiting {waiting}"
        )
    held = set(bm.sequences())
    for seq in sched.running:
        if seq.seq_id not in held:
            raise InvariantViolation("kv-slots", f"running sequence {seq.seq_id} holds no blocks")
        if bm.seq_len(seq.seq_id) != seq.num_tokens - 1:
            raise InvariantViolation(
                "kv-slots",
                f"running sequence {seq.seq_id} has {seq.num_tokens} tokens but "
                f"{bm.seq_len(seq.seq_id)} KV slots; it should have {seq.num_tokens - 1}",
            )
    for sid in waiting:
        if sid in held:
            raise InvariantViolation(
                "kv-slots", f"waiting sequence {sid} still holds blocks {bm.block_table(sid)}"
            )
    stray = held - set(running)
    if stray:
        preempted = model is not None and stray <= set(model.waiting)
        raise InvariantViolation(
            "kv-slots" if preempted else "finished-freed",
            f"sequences {sorted(stray)} hold blocks but are not running (leaked)",
        )
    if model is not None and bm.num_free != model.num_free:
        raise InvariantViolation(
            "no-leak", f"{bm.num_free} blocks are free; the model says {model.num_free}"
        )


@dataclass(frozen=True)
class QueueState:
    """The queues before a step: enough to check the step's rules without a model."""

    running: tuple[Any, ...]
    waiting: tuple[Any, ...]
    tokens: dict[int, int]

    @classmethod
    def of(cls, sched: Any) -> QueueState:
        seqs = (*sched.running, *sched.waiting)
        return cls(
            tuple(sched.running), tuple(sched.waiting), {s.seq_id: s.num_tokens for s in seqs}
        )


def check_step_rules(sched: Any, before: QueueState, out: StepOutput) -> None:
    """The rules of one ``step()`` that need no model: finished ones freed, victims the newest
    and re-queued at the front with every token, admission above the watermark at full length.
    """
    bm = sched.bm
    held = set(bm.sequences())
    finished = [s for s in before.running if s.is_finished]
    if [s.seq_id for s in out.finished] != [s.seq_id for s in finished] or any(
        s.seq_id in held for s in finished
    ):
        raise InvariantViolation(
            "finished-freed",
            f"finished before the step: {_ids(finished)}; reported {_ids(out.finished)}, "
            f"still holding blocks: {[s.seq_id for s in finished if s.seq_id in held]}",
        )
    alive = [s.seq_id for s in before.running if not s.is_finished]
    victims = _ids(out.preempted)
    if victims != alive[::-1][: len(victims)]:
        raise InvariantViolation(
            "victim-newest", f"running (oldest first) was {alive}; preempted {victims}"
        )
    if _ids(list(sched.waiting)[: len(victims)]) != victims[::-1]:
        raise InvariantViolation(
            "requeue-front",
            f"preempted {victims}, but waiting starts {_ids(sched.waiting)[: len(victims)]}",
        )
    for seq in out.preempted:
        if seq.num_tokens != before.tokens[seq.seq_id] or seq.seq_id in held:
            raise InvariantViolation(
                "requeue-length",
                f"preempted sequence {seq.seq_id} must keep its {before.tokens[seq.seq_id]} "
                f"tokens (it has {seq.num_tokens}) and give back its blocks",
            )
    for p in out.prefills:
        if p.num_tokens != p.seq.num_tokens or bm.seq_len(p.seq.seq_id) != p.num_tokens:
            raise InvariantViolation(
                "requeue-length",
                f"sequence {p.seq.seq_id} has {p.seq.num_tokens} tokens (prompt + generated) "
                f"but was prefilled at {p.num_tokens}",
            )
    if out.prefills and bm.num_free < sched.watermark:
        raise InvariantViolation(
            "watermark",
            f"admission left {bm.num_free} free blocks, below the watermark {sched.watermark}",
        )


def liveness_bound(seqs: Iterable[Sequence]) -> int:
    """Steps within which every live sequence must finish and be retired.

    In every step the oldest unfinished sequence gets one token (a prefill samples one too),
    so ``sum(tokens left) + 1`` steps (the last one retires) drain the queue.
    """
    return sum(s.max_new_tokens - s.num_generated for s in seqs) + 1


def run_until_idle(sched: Any, max_steps: int | None = None) -> int:
    """Step ``sched`` (playing the engine) until nothing waits or runs; returns the steps.

    Checks the step rules and the invariants after every step, that the queue drains within
    :func:`liveness_bound` (or ``max_steps``), and that no block is still held at the end.
    """
    live = [*sched.running, *sched.waiting]
    limit = liveness_bound(live) if max_steps is None else max_steps
    steps = 0
    while sched.running or sched.waiting:
        if steps >= limit:
            raise InvariantViolation(
                "liveness",
                f"{len(sched.running)} running and {len(sched.waiting)} waiting after {steps} "
                f"steps; every sequence should have finished within {limit}",
            )
        before = QueueState.of(sched)
        out = sched.step()
        check_step_rules(sched, before, out)
        emit_tokens(out)
        check_scheduler_invariants(sched)
        steps += 1
    if sched.bm.num_free != sched.bm.num_blocks:
        raise InvariantViolation(
            "no-leak",
            f"the queue drained but only {sched.bm.num_free} of {sched.bm.num_blocks} blocks "
            "are free",
        )
    return steps


def _new_sequence_code(sid: int, prompt_len: int, max_new_tokens: int) -> str:
    return f"Sequence.dummy({sid}, prompt_len={prompt_len}, max_new_tokens={max_new_tokens})"


def scheduler_machine(
    impl: Any,
    *,
    stage: int,
    name: str = "Scheduler",
    max_blocks: int = 8,
) -> type[RecordingMachine]:
    """A state machine checking ``impl(bm, watermark=w)`` against :class:`SchedulerModel`.

    Stage 1 takes a single step (a step-1 scheduler does not decode yet); stage 2 only adds
    requests that fit all at once, so no decode ever runs out of blocks; stage 3 is the full
    step with preemption.
    """

    class SchedulerMachine(RecordingMachine):
        def __init__(self) -> None:
            super().__init__()
            self.sched: Any = None
            self.model = SchedulerModel(1, 1, 0, stage)
            self.seqs: dict[int, Sequence] = {}
            self.steps = 0

        @initialize(
            num_blocks=st.integers(min_value=2, max_value=max_blocks),
            block_size=st.sampled_from([1, 2, 4]),
            watermark=st.integers(min_value=0, max_value=2),
        )
        def create(self, num_blocks: int, block_size: int, watermark: int) -> None:
            watermark = min(watermark, (num_blocks - 1) // 2)
            self.model = SchedulerModel(num_blocks, block_size, watermark, stage)
            self.record(f"bm = BlockManager(num_blocks={num_blocks}, block_size={block_size})")
            bm = BlockManager(num_blocks, block_size)
            self.sched = self.do(
                f"sched = {name}(bm, watermark={watermark})",
                lambda: impl(bm, watermark=watermark),
            )

        def _fits_with_everyone(self, prompt_len: int, new: int) -> bool:
            m = self.model
            live = [s for s in m.tokens if s in m.running or s in m.waiting]
            total = sum(m.blocks(m.prompt[s] + m.max_new[s]) for s in live)
            return total + m.blocks(prompt_len + new) <= m.num_blocks - m.watermark

        @rule(data=st.data())
        def add(self, data: st.DataObject) -> None:
            m = self.model
            # At stage 1 a request may still arrive after the one step (no step follows it):
            # whether it is too large depends on the pool, not on the blocks free now.
            later = stage == 1 and self.steps > 0
            # Lengths near the largest the pool takes, so two requests overflow it (Hypothesis
            # draws small numbers most often, so draw the slack below the limit); short
            # prompts, so sequences grow; now and then one that can never fit, or one that
            # lands right at the watermark.
            cap = (m.num_blocks - m.watermark) * m.block_size
            kind = data.draw(st.integers(min_value=0, max_value=8), "kind")
            if kind == 6 and not later and self._add_at_the_watermark(data):
                return
            if kind == 7:
                total = cap + data.draw(st.integers(min_value=1, max_value=4), "excess")
            elif kind == 8:
                # Short requests, so several run at once and one step that runs out of blocks
                # preempts more than one of them.
                total = data.draw(st.integers(min_value=2, max_value=max(2, m.block_size + 1)))
            else:
                slack = data.draw(st.integers(min_value=0, max_value=max(0, cap - 2)), "slack")
                total = max(2, cap - slack)
            prompt_len = data.draw(st.integers(min_value=1, max_value=total - 1), "prompt_len")
            self._add(data, prompt_len, total - prompt_len)

        def _add_at_the_watermark(self, data: st.DataObject) -> bool:
            """Add a request next in line at the coming step whose prompt fits the free blocks
            but not above the watermark, a window random lengths seldom land in, and take that
            step; False if there is no such window now."""
            m = self.model
            if not m.watermark:
                return False
            after = copy.deepcopy(m)
            after.step()
            room = (m.num_blocks - m.watermark) * m.block_size - 1  # for the prompt, at most
            low = max(1, after.num_free - m.watermark + 1)
            high = min(after.num_free, m.blocks(room))
            if after.waiting or low > high:
                return False
            blocks = data.draw(st.integers(min_value=low, max_value=high), "blocks")
            prompt_len = data.draw(
                st.integers(
                    min_value=(blocks - 1) * m.block_size + 1,
                    max_value=min(blocks * m.block_size, room),
                ),
                "prompt_len",
            )
            new = data.draw(st.integers(min_value=1, max_value=room + 1 - prompt_len), "new")
            self._add(data, prompt_len, new)
            self._one_step()
            return True

        def _unused_ids(self, count: int) -> list[int]:
            taken = self.model.tokens
            return [i for i in range(len(taken) + count) if i not in taken][:count]

        @precondition(lambda self: stage == 3)
        @rule(count=st.integers(min_value=2, max_value=4), times=st.integers(1, 4))
        def crowd(self, count: int, times: int) -> None:
            # Short requests arriving with falling ids (an id names a sequence, it does not
            # order it), then a few steps: a pool full of short sequences makes one step
            # preempt several, and the newest victim is not the highest id.
            m = self.model
            for sid in reversed(self._unused_ids(count)):
                self._add(None, 1, m.block_size + 1, sid)
            self.step(times)

        def _add(
            self, data: st.DataObject | None, prompt_len: int, new: int, sid: int | None = None
        ) -> None:
            m = self.model
            fits = m.too_large(prompt_len, new) or self._fits_with_everyone(prompt_len, new)
            if stage == 2 and not fits:
                return
            if sid is None:
                # Ids are names, not arrival order: one of the three lowest unused, so a later
                # request can carry a smaller id (shrinking goes back to ids in order).
                assert data is not None
                sid = data.draw(st.sampled_from(self._unused_ids(3)), "seq_id")
            seq = Sequence.dummy(sid, prompt_len, new)
            code = f"sched.add({_new_sequence_code(sid, prompt_len, new)})"
            if m.too_large(prompt_len, new):
                waiting = _ids(self.sched.waiting)
                try:
                    self.do(code, lambda: self.sched.add(seq))
                except RequestTooLarge:
                    if _ids(self.sched.waiting) != waiting:
                        raise InvariantViolation(
                            "too-large", f"`{code}` raised but changed waiting"
                        ) from None
                    return
                raise InvariantViolation(
                    "too-large",
                    f"`{code}` returned normally: its {prompt_len + new} tokens need "
                    f"{m.blocks(prompt_len + new)} blocks, more than the "
                    f"{m.num_blocks - m.watermark} the pool can ever give above the watermark",
                )
            try:
                self.do(code, lambda: self.sched.add(seq))
            except RequestTooLarge as exc:
                raise InvariantViolation(
                    "too-large",
                    f"`{code}` raised RequestTooLarge, but its {prompt_len + new} tokens "
                    f"need {m.blocks(prompt_len + new)} of the "
                    f"{m.num_blocks - m.watermark} blocks above the watermark: it fits",
                ) from exc
            self.seqs[sid] = seq
            m.add(sid, prompt_len, new)

        @precondition(lambda self: stage > 1 or self.steps == 0)
        @rule(times=st.integers(min_value=1, max_value=1 if stage == 1 else 6))
        def step(self, times: int) -> None:
            for i in range(times):
                if i:
                    check_scheduler_invariants(self.sched, self.model)
                self._one_step()

        def _one_step(self) -> None:
            code = "out = sched.step()"
            try:
                out = self.do(code, lambda: self.sched.step())
            except OutOfBlocks as exc:
                want = self.model.step()
                if _raised_in(exc, "append_slot"):
                    raise InvariantViolation(
                        "victim-newest",
                        f"`sched.step()` raised {type(exc).__name__}: {exc}; a decode that "
                        f"finds no free block must preempt the newest (here {want.preempted})",
                    ) from exc
                raise InvariantViolation(
                    "watermark",
                    f"`sched.step()` raised {type(exc).__name__}: {exc}; admission took a "
                    "sequence it had no room for (size each admission by the tokens it "
                    "allocates, and keep the watermark free)",
                ) from exc
            want = self.model.step()
            self.steps += 1
            compare_step(self.sched, out, want, self.model, self.seqs, "sched.step()")
            self.record("emit_tokens(out)")
            emit_tokens(out)
            self.model.emit(want)

        @precondition(lambda self: callable(getattr(self.sched, "fits", None)))
        @rule(data=st.data())
        def ask_fits(self, data: st.DataObject) -> None:
            # fits(n) is part of the step-1 contract, not only admit's helper: compare its
            # answer, at the edge of the watermark most of the time, and for zero tokens
            m = self.model
            edge = max(0, (m.num_free - m.watermark) * m.block_size)
            n_tokens = data.draw(
                st.one_of(
                    st.integers(max(0, edge - 1), edge + 1),
                    st.integers(0, (m.num_blocks + 1) * m.block_size),
                ),
                "n_tokens",
            )
            before = (_ids(self.sched.waiting), _ids(self.sched.running), self.sched.bm.num_free)
            code = f"sched.fits({n_tokens})"
            got = self.do(code, lambda: self.sched.fits(n_tokens))
            want = m.num_free - m.blocks(n_tokens) >= m.watermark
            if got != want:
                raise InvariantViolation(
                    "fits-answer",
                    f"`{code}` returned {got!r}, expected {want}: {n_tokens} tokens take "
                    f"{m.blocks(n_tokens)} of the {m.num_free} free blocks, leaving "
                    f"{m.num_free - m.blocks(n_tokens)} (watermark {m.watermark})",
                )
            after = (_ids(self.sched.waiting), _ids(self.sched.running), self.sched.bm.num_free)
            if after != before:
                raise InvariantViolation(
                    "fits-answer", f"`{code}` changed the scheduler: fits only answers"
                )

        @invariant()
        def rules_hold(self) -> None:
            if self.sched is not None:
                check_scheduler_invariants(self.sched, self.model)

    SchedulerMachine.__name__ = f"SchedulerMachine_stage{stage}"
    return SchedulerMachine
