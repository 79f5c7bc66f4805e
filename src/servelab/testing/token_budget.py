"""The token-budget scheduler's rules as code: an executable model, per-step checks, a machine.

:class:`TokenBudgetModel` executes the rules of :mod:`servelab.kv.budget` plainly, on its own copy
("twin") of the block manager: the same class, driven with the same calls a correct scheduler
makes, so its free blocks, prefix hits and block ids are what the implementation's must be.
:func:`check_step` checks one step's output against rules that need no model (budget, cap,
running before waiting, slots where the tables put them, ``num_computed_tokens`` advanced by
exactly what ran); :func:`compare_step` then compares it with the model's step, field by field.
:func:`token_budget_machine` drives both from Hypothesis, with small vocabularies so that prompts
share prefixes, and drains the queue at the end: every admitted request must finish and every
block must come back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from servelab.kv.blocks import BlockManager, OutOfBlocks, UnknownSequence
from servelab.kv.budget import BudgetStep, PrefixLookup, TokenBudgetScheduler
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import KVCacheManager, RequestTooLarge, Sequence
from servelab.testing.core import InvariantViolation, RecordingMachine

__all__ = [
    "INVARIANTS",
    "ModelStep",
    "TokenBudgetModel",
    "check_step",
    "compare_step",
    "drain",
    "token_budget_machine",
]

INVARIANTS: dict[str, str] = {
    "budget": "a step computes at most max_num_batched_tokens tokens",
    "nonempty": "every scheduled chunk runs at least one token",
    "cap": "at most max_num_seqs requests are running",
    "running-first": "the running requests are scheduled first, in order, oldest first",
    "fcfs": "waiting requests are admitted first come, first served: none overtakes the head",
    "computed": "num_computed_tokens advances by exactly the tokens that ran",
    "slots": "a chunk's slots are where its block table puts its positions, distinct in a step",
    "own-slots": "each chunk of a step holds a slots list of its own",
    "preempted-idle": "a request preempted in a step runs nothing in it",
    "sample": "a chunk samples exactly when it reaches the end of its request's tokens",
    "kv-slots": "a running request holds KV slots for its computed tokens; a waiting one none",
    "model": "the step equals the rules' step (who runs, which tokens, who is preempted)",
    "no-leak": "once drained, every block is free again",
    "liveness": "every admitted request finishes",
}

Chunk = tuple[int, int, int, bool, tuple[int, ...]]  # (seq id, start, tokens, samples, slots)


@dataclass
class ModelStep:
    """The expected step, by sequence id."""

    scheduled: list[Chunk] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)


class TokenBudgetModel:
    """The scheduling rules, written as plainly as possible, over a twin block manager."""

    def __init__(
        self,
        bm: KVCacheManager,
        budget: int,
        max_num_seqs: int,
        watermark_blocks: int,
        *,
        chunked: bool = True,
    ) -> None:
        self.bm = bm
        self.chunked = chunked  # False: a prompt is admitted whole or waits
        self.budget = budget
        self.max_num_seqs = max_num_seqs
        self.watermark_blocks = watermark_blocks
        self.tokens: dict[int, list[int]] = {}
        self.prompt_len: dict[int, int] = {}
        self.max_new: dict[int, int] = {}
        self.computed: dict[int, int] = {}
        self.running: list[int] = []
        self.waiting: list[int] = []

    def blocks(self, n_tokens: int) -> int:
        return -(-n_tokens // self.bm.block_size)

    def too_large(self, prompt_len: int, max_new: int) -> bool:
        return self.blocks(prompt_len + max_new - 1) > self.bm.num_blocks

    def add(self, sid: int, prompt: list[int], max_new: int) -> None:
        self.tokens[sid] = list(prompt)
        self.prompt_len[sid] = len(prompt)
        self.max_new[sid] = max_new
        self.computed[sid] = 0
        self.waiting.append(sid)

    def finished(self, sid: int) -> bool:
        return len(self.tokens[sid]) - self.prompt_len[sid] >= self.max_new[sid]

    def hit(self, sid: int) -> int:
        bm = self.bm
        return bm.num_cached_tokens(self.tokens[sid]) if isinstance(bm, PrefixLookup) else 0

    def _slots(self, sid: int, start: int, n: int) -> tuple[int, ...]:
        size, table = self.bm.block_size, self.bm.block_table(sid)
        return tuple(table[p // size] * size + p % size for p in range(start, start + n))

    def step(self) -> ModelStep:
        out = ModelStep()
        for sid in [s for s in self.running if self.finished(s)]:
            self.running.remove(sid)
            self.bm.free_seq(sid)
            out.finished.append(sid)
        left = self.budget
        done: list[int] = []  # running requests scheduled so far
        for sid in list(self.running):
            if left == 0 or sid not in self.running:
                break
            start = self.computed[sid]
            n = min(len(self.tokens[sid]) - start, left)
            need = self.blocks(start + n) - self.blocks(start)
            while need > self.bm.num_free and sid in self.running:
                victim = self.running.pop()
                self.bm.free_seq(victim)
                self.computed[victim] = 0
                self.waiting.insert(0, victim)
                out.preempted.append(victim)
            if sid not in self.running:
                break
            for token in self.tokens[sid][start : start + n]:
                self.bm.append_slot(sid, token)
            out.scheduled.append(
                (sid, start, n, start + n == len(self.tokens[sid]), self._slots(sid, start, n))
            )
            self.computed[sid] = start + n
            left -= n
            done.append(sid)
        while not out.preempted and self.waiting and left and len(self.running) < self.max_num_seqs:
            sid = self.waiting[0]
            hit = self.hit(sid)
            n = min(len(self.tokens[sid]) - hit, left)
            if not self.chunked and n < len(self.tokens[sid]) - hit:
                break
            if self.watermark_blocks and self.running:
                # what the admission takes from the free count, new blocks and revived cached
                # ones alike, found by trying it on a copy
                trial = copy.deepcopy(self.bm)
                try:
                    trial.allocate(sid, self.tokens[sid][: hit + n])
                except OutOfBlocks:
                    break
                if trial.num_free < self.watermark_blocks:
                    break
            try:
                self.bm.allocate(sid, self.tokens[sid][: hit + n])
            except OutOfBlocks:
                break
            self.waiting.pop(0)
            self.running.append(sid)
            out.scheduled.append(
                (sid, hit, n, hit + n == len(self.tokens[sid]), self._slots(sid, hit, n))
            )
            self.computed[sid] = hit + n
            left -= n
        return out

    def emit(self, sid: int, token: int) -> None:
        self.tokens[sid].append(token)


def _state(sched: Any) -> tuple[list[int], list[int], dict[int, int]]:
    running = [s.seq_id for s in sched.running]
    waiting = [s.seq_id for s in sched.waiting]
    computed = {sid: sched.num_computed_tokens(sid) for sid in running + waiting}
    return running, waiting, computed


def check_step(
    sched: Any, before: tuple[list[int], list[int], dict[int, int]], out: BudgetStep
) -> None:
    """The rules one step must satisfy, whatever the pool's state (no model needed)."""
    running, waiting, computed = before
    budget, cap = sched.max_num_batched_tokens, sched.max_num_seqs
    if out.num_batched_tokens > budget:
        raise InvariantViolation(
            "budget", f"the step computes {out.num_batched_tokens} tokens, budget {budget}"
        )
    if len(sched.running) > cap:
        raise InvariantViolation("cap", f"{len(sched.running)} running, max_num_seqs {cap}")
    finished = {s.seq_id for s in out.finished}
    still = [sid for sid in running if sid not in finished]
    ran = [c.seq.seq_id for c in out.scheduled[: out.num_running]]
    if ran != still[: len(ran)]:
        raise InvariantViolation(
            "running-first", f"running {still} scheduled as {ran}: running order, oldest first"
        )
    queue = [v.seq_id for v in reversed(out.preempted)] + waiting
    admitted = [c.seq.seq_id for c in out.admitted]
    if admitted != queue[: len(admitted)]:
        raise InvariantViolation(
            "fcfs", f"waiting {queue} admitted as {admitted}: first come, first served"
        )
    gone = {v.seq_id for v in out.preempted}
    for chunk in out.scheduled:  # before its slots: a victim's chunk has no blocks of its own
        if chunk.seq.seq_id in gone:
            raise InvariantViolation(
                "preempted-idle",
                f"sequence {chunk.seq.seq_id} was preempted in this step, yet has a chunk in it",
            )
    size = sched.bm.block_size
    seen: set[int] = set()
    lists: dict[int, int] = {}
    for chunk in out.scheduled:  # first: a shared list shows one chunk's slots in another
        other = lists.setdefault(id(chunk.slots), chunk.seq.seq_id)
        if other != chunk.seq.seq_id and isinstance(chunk.slots, list):
            raise InvariantViolation(
                "own-slots",
                f"sequences {other} and {chunk.seq.seq_id}: their chunks in one step hold "
                "one slots list, the same object",
            )
    for i, chunk in enumerate(out.scheduled):
        sid = chunk.seq.seq_id
        if i < out.num_running and chunk.start != computed[sid]:
            raise InvariantViolation(
                "computed",
                f"sequence {sid} had {computed[sid]} computed, chunk starts at {chunk.start}",
            )
        if chunk.num_tokens < 1:
            raise InvariantViolation("nonempty", f"sequence {sid} scheduled with no token")
        if sched.num_computed_tokens(sid) != chunk.start + chunk.num_tokens:
            raise InvariantViolation(
                "computed",
                f"sequence {sid} ran {chunk.num_tokens} tokens from {chunk.start} but has "
                f"num_computed_tokens {sched.num_computed_tokens(sid)}",
            )
        if chunk.samples != (chunk.start + chunk.num_tokens == chunk.seq.num_tokens):
            raise InvariantViolation(
                "sample", f"sequence {sid}: chunk {chunk.positions} of {chunk.seq.num_tokens}"
            )
        table = sched.bm.block_table(sid)
        want = [table[p // size] * size + p % size for p in chunk.positions]
        if list(chunk.slots) != want or seen & set(want):
            raise InvariantViolation(
                "slots", f"sequence {sid}: slots {chunk.slots}, its table puts them at {want}"
            )
        seen.update(want)


def check_held(sched: Any) -> None:
    """Running requests hold exactly their computed tokens' slots; waiting ones hold none."""
    bm = sched.bm
    for seq in sched.running:
        if bm.seq_len(seq.seq_id) != sched.num_computed_tokens(seq.seq_id):
            raise InvariantViolation(
                "kv-slots",
                f"sequence {seq.seq_id} holds {bm.seq_len(seq.seq_id)} slots, "
                f"num_computed_tokens {sched.num_computed_tokens(seq.seq_id)}",
            )
    for seq in sched.waiting:
        try:
            bm.seq_len(seq.seq_id)
        except UnknownSequence:
            if sched.num_computed_tokens(seq.seq_id) == 0:
                continue
        raise InvariantViolation("kv-slots", f"waiting sequence {seq.seq_id} holds KV")


def compare_step(out: BudgetStep, want: ModelStep) -> None:
    got = ModelStep(
        [(c.seq.seq_id, c.start, c.num_tokens, c.samples, tuple(c.slots)) for c in out.scheduled],
        [s.seq_id for s in out.preempted],
        [s.seq_id for s in out.finished],
    )
    for name in ("finished", "preempted", "scheduled"):
        if getattr(got, name) != getattr(want, name):
            raise InvariantViolation(
                "model", f"{name}: got {getattr(got, name)}, the rules give {getattr(want, name)}"
            )


def drain(sched: Any, token: Callable[[Sequence], int], max_steps: int) -> int:
    """Step until idle, appending ``token(seq)`` to each sampling request; the steps taken."""
    for steps in range(max_steps):
        if sched.is_idle:
            return steps
        for seq in sched.step().computed():
            seq.append_token(token(seq))
    if not sched.is_idle:
        raise InvariantViolation("liveness", f"still busy after {max_steps} steps: {sched!r}")
    return max_steps


_STEMS = ([0, 1, 2], [1])


def _token(seq: Sequence) -> int:
    return (seq.seq_id + seq.num_tokens) % 3


def token_budget_machine(
    impl: Any = TokenBudgetScheduler,
    *,
    prefix_caching: bool,
    name: str = "TokenBudgetScheduler",
    stage: int | None = None,
) -> type[RecordingMachine]:
    """A state machine checking ``impl(bm, max_num_batched_tokens=..., max_num_seqs=...,
    watermark=...)`` against :class:`TokenBudgetModel`, on the plain or the prefix-caching manager.

    ``stage`` grades notebook 07's steps, with no watermark: 1 admits prompts whole (a budget
    that holds every request) and 2 in chunks, both in a pool that never runs out; 3 adds
    memory pressure, hence preemption.
    """
    manager = "PrefixCachingBlockManager" if prefix_caching else "BlockManager"
    roomy = stage in (1, 2)
    budgets = st.integers(min_value=10, max_value=12) if stage == 1 else st.integers(1, 12)
    pools = st.just(40) if roomy else st.integers(min_value=2, max_value=10)
    watermarks = st.just(0.0) if stage else st.sampled_from([0.0, 0.0, 0.25])

    def new_manager(num_blocks: int, block_size: int) -> KVCacheManager:
        if prefix_caching:
            return PrefixCachingBlockManager(num_blocks, block_size)
        return BlockManager(num_blocks, block_size)

    class BudgetMachine(RecordingMachine):
        def __init__(self) -> None:
            super().__init__()
            self.sched: Any = None
            self.model = TokenBudgetModel(new_manager(1, 1), 1, 1, 0)
            self.seqs: dict[int, Sequence] = {}
            self.next_id = 0
            self.failed = False  # a rule or an invariant raised: the program ends there

        @initialize(
            num_blocks=pools,
            block_size=st.sampled_from([1, 2, 3, 4]),
            budget=budgets,
            cap=st.integers(min_value=1, max_value=4),
            watermark=watermarks,
        )
        def create(
            self, num_blocks: int, block_size: int, budget: int, cap: int, watermark: float
        ) -> None:
            self.record(f"bm = {manager}(num_blocks={num_blocks}, block_size={block_size})")
            bm = new_manager(num_blocks, block_size)
            kwargs: dict[str, Any] = {"max_num_batched_tokens": budget, "max_num_seqs": cap}
            if stage is None:
                kwargs["watermark"] = watermark
            args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
            self.sched = self.do(f"sched = {name}(bm, {args})", lambda: impl(bm, **kwargs))
            self.model = TokenBudgetModel(
                new_manager(num_blocks, block_size),
                budget,
                cap,
                int(num_blocks * watermark),
                chunked=stage != 1,
            )

        @rule(data=st.data())
        def add(self, data: st.DataObject) -> None:
            # Lengths near the most the pool holds (so requests crowd each other out and get
            # preempted), now and then one that can never fit; prompts that start with one of
            # two stems, so they share blocks in the prefix cache.
            bm = self.model.bm
            room = bm.num_blocks * bm.block_size + 1  # prompt + max_new of the largest fitting
            if roomy:  # short requests: at most 4 running never fill 40 blocks
                room = 10
            if data.draw(st.integers(min_value=0, max_value=9), "kind") == 9 and not roomy:
                total = room + data.draw(st.integers(min_value=1, max_value=3), "excess")
            else:
                slack = data.draw(st.integers(min_value=0, max_value=max(0, room - 2)), "slack")
                total = max(2, room - slack)
            max_new = data.draw(st.integers(min_value=1, max_value=min(6, total - 1)), "max_new")
            stem = _STEMS[data.draw(st.integers(min_value=0, max_value=1), "stem")]
            own = data.draw(st.integers(min_value=0, max_value=total - max_new - 1), "own")
            tail = data.draw(
                st.lists(st.integers(min_value=0, max_value=2), min_size=own, max_size=own), "tail"
            )
            prompt = (stem * total)[: total - max_new - own] + tail
            self._ending(lambda: self._add(prompt, max_new))

        def _ending(self, run: Callable[[], None]) -> None:
            """Run ``run``; where it raises, mark the program failed (teardown then drains
            nothing: Hypothesis calls it even after a failure, and steps run past a failure
            would replace it with one of their own, such as a token the failed step never
            appended)."""
            try:
                run()
            except BaseException:
                self.failed = True
                raise

        def _add(self, prompt: list[int], max_new: int) -> None:
            sid = self.next_id
            self.next_id += 1
            seq = Sequence.from_prompt(sid, prompt, max_new)
            code = f"sched.add(Sequence.from_prompt({sid}, {prompt}, {max_new}))"
            before = _state(self.sched)
            if self.model.too_large(len(prompt), max_new):
                try:
                    self.do(code, lambda: self.sched.add(seq))
                except RequestTooLarge:
                    if _state(self.sched) != before:
                        raise InvariantViolation(
                            "model", "a rejected add changed the queues"
                        ) from None
                    return
                raise InvariantViolation("model", f"{code} should raise RequestTooLarge")
            self.do(code, lambda: self.sched.add(seq))
            self.seqs[sid] = seq
            self.model.add(sid, prompt, max_new)

        @rule()
        def step(self) -> None:
            self._ending(self._step)

        def _step(self) -> None:
            before = _state(self.sched)
            out = self.do("out = sched.step()", self.sched.step)
            check_step(self.sched, before, out)
            compare_step(out, self.model.step())
            for seq in out.computed():
                token = _token(seq)
                self.record(f"sched.sequence({seq.seq_id}).append_token({token})")
                seq.append_token(token)
                self.model.emit(seq.seq_id, token)

        @invariant()
        def held(self) -> None:
            self._ending(self._held)

        def _held(self) -> None:
            if self.sched is not None:
                check_held(self.sched)
                if self.sched.bm.num_free != self.model.bm.num_free:
                    raise InvariantViolation(
                        "model",
                        f"{self.sched.bm.num_free} free blocks, the rules leave "
                        f"{self.model.bm.num_free}",
                    )

        def teardown(self) -> None:
            if self.sched is None or self.failed:
                return
            bound = sum(s.max_len for s in self.seqs.values()) * 4 + 8
            for _ in range(bound):  # drain, still step for step against the model
                if self.sched.is_idle:
                    break
                self._step()
                self._held()
            unfinished = [sid for sid, s in self.seqs.items() if not s.is_finished]
            if unfinished:
                raise InvariantViolation("liveness", f"requests {unfinished} never finished")
            bm = self.sched.bm
            if bm.num_free != bm.num_blocks:
                raise InvariantViolation(
                    "no-leak", f"drained, yet {bm.num_blocks - bm.num_free} blocks are held"
                )

    BudgetMachine.__name__ = BudgetMachine.__qualname__ = (
        f"BudgetMachine{'Prefix' if prefix_caching else 'Plain'}"
    )
    return BudgetMachine
