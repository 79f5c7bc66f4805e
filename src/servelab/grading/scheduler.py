"""Grader topic ``scheduler``: the three steps of notebook 04.

The learner's class has the seed's shape, over the reference ``BlockManager``:

* ``Scheduler(bm, watermark=w)`` — ``watermark`` is a block count;
* ``add(seq)`` queues a ``Sequence`` at the back of ``waiting`` and raises ``RequestTooLarge``
  when ``prompt_len + max_new_tokens`` tokens need more than ``num_blocks - watermark`` blocks;
* ``step()`` returns a :class:`~servelab.kv.scheduler.StepOutput`: it retires finished
  sequences (``finished``), decodes every running sequence oldest first (``decodes``),
  preempting the newest on ``OutOfBlocks`` (``preempted``), then admits first come, first
  served while ``bm.num_free - blocks_needed(n) >= watermark`` (``prefills``,
  ``n = seq.num_tokens``);
* ``waiting`` (next to admit first) and ``running`` (oldest first): sequences of ``Sequence``.

Between steps the grader plays the engine: it appends one dummy token to every sequence in
``out.computed()`` (``emit_tokens(out)`` in the printed repro).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from servelab.grading._script import Script, graded_names
from servelab.grading.about import RESULT, About, Hint
from servelab.grading.scheduler_finished import (
    finished_in_running_order,
    frees_finished_anywhere,
    others_keep_their_order,
)
from servelab.grading.scheduler_orders import order_probes
from servelab.grading.scheduler_output import PREEMPTED, listed_not_queued, preempted_not_queued
from servelab.grading.scheduler_replay import REPLAY
from servelab.grading.topic import MachineCheck, Probe, ProbeFailed, Step, Topic
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import RequestTooLarge, Sequence, StepOutput
from servelab.testing.scheduler import INVARIANTS, scheduler_machine

__all__ = ["HINTS", "TOPIC"]

HINTS: dict[str, Hint] = {
    "fits-answer": Hint(
        "fits(n_tokens) answers bm.num_free - bm.blocks_needed(n_tokens) >= watermark, for any "
        "n_tokens (0 included), and changes nothing",
        About(("fits",)),
    ),
    "too-large": Hint(
        "add() must raise RequestTooLarge when blocks_needed(prompt_len + max_new_tokens) > "
        "num_blocks - watermark: such a request could be preempted at a length it can never be "
        "readmitted at",
        About(("add",)),
    ).before(
        3,
        "add() must raise RequestTooLarge when blocks_needed(prompt_len + "
        "max_new_tokens) > num_blocks - watermark, and only then",
    ),
    "watermark": Hint(
        "`admit` takes a request only while `fits(n)`: bm.num_free - blocks_needed(n) >= "
        "watermark, n the tokens it allocates; the watermark keeps free blocks for the next "
        "decode step",
        About(("admit", "fits")),
    ),
    "admit-loop": Hint(
        "`admit` goes on taking the head of waiting while it fits (fits(seq.num_tokens), asked "
        "of the pool before the head's blocks are allocated), and stops only at the first "
        "request that does not",
        About(("admit",)),
    ),
    "fcfs": Hint(
        "`admit` is first come, first served: stop (break) at the first waiting sequence "
        "that does not fit; nobody behind it may overtake",
        About(("admit",)),
    ),
    "prefill-length": Hint(
        "a prefill covers every token the sequence has: `admit` allocates and prefills "
        "seq.num_tokens tokens (prompt + generated), num_cached 0: none holds KV yet",
        About(("admit",), ("tables", "lengths", "out.prefills")),
    ),
    "finished-freed": Hint(
        "retire finished sequences at the start of step(): bm.free_seq(seq.seq_id) for every "
        "running sequence with seq.is_finished, drop it from running and list it in "
        "out.finished",
        About(("retire", "step"), ("running", "out.finished", "free", "num_free")),
    ),
    "retire-early": Hint(
        "a sequence is finished only once it has generated max_new_tokens tokens "
        "(seq.is_finished): retiring it a step early drops its last token",
        About(("retire",)),
    ),
    "decode-then-admit": Hint(
        "decode the running sequences before admitting: a sequence admitted in this step is "
        "prefilled, and admitting before decoding takes the blocks the decodes need",
        About(("step", "decode", "admit")),
    ),
    "decode-order": Hint(
        "decode every running sequence exactly once per step, oldest first (the order of "
        "running), with slot = bm.append_slot(seq.seq_id)",
        About(("decode",), ("out.decodes",)),
    ),
    "victim-newest": Hint(
        "on OutOfBlocks, `decode` preempts the newest running sequence, the last of running "
        "(running.pop()), and retries; preempt only when a decode finds no free block",
        About(("decode", "preempt"), ("running", "tables", "lengths", "out.decodes")),
    ),
    "requeue-front": Hint(
        "`preempt` re-queues a sequence at the front of waiting (waiting.appendleft), so it is "
        "the first to come back",
        About(("preempt",), ("waiting",)),
    ),
    "requeue-length": Hint(
        "a preempted sequence keeps its tokens: re-queued length = prompt + generated, so "
        "`admit` re-prefills seq.num_tokens tokens, not seq.prompt_len",
        About(("preempt", "admit")),
    ),
    "kv-slots": Hint(
        "a preempted sequence must give back its blocks (bm.free_seq) before it waits; a "
        "running one holds KV for all its tokens but the newest",
        About(("preempt", "decode")),
    ).before(3, "a running sequence holds KV for all its tokens but the newest"),
    "no-leak": Hint(
        "blocks went missing: free every block of finished and preempted sequences",
        About(("retire", "preempt"), ("free", "num_free")),
    )
    .before(
        2,
        "blocks went missing: a block leaves the free list only for the table of a "
        "sequence that `admit` puts in running",
    )
    .before(3, "blocks went missing: free every block of finished sequences"),
    "liveness": Hint(
        "a sequence never finished: the oldest unfinished sequence must get a token in every "
        "step (decode oldest first, preempt the newest, admit first come, first served)",
        About(("decode", "preempt", "admit")),
    ),
    "free-list": Hint(
        "the block manager's free list broke: does your scheduler change it other than "
        "through its public methods?",
        About(),
    ),
    "refcount-matches-tables": Hint(
        "the block manager's refcounts broke: does your scheduler change them other "
        "than through its public methods?",
        About(),
    ),
    "table-length": Hint(
        "the block manager's tables broke: does your scheduler change them other than "
        "through its public methods?",
        About(),
    ),
}

_RETRY = Hint(
    "after a preemption, retry the decode of the sequence whose append_slot failed (the "
    "victim's blocks are free now); `decode` moves on only once that sequence has decoded or "
    "is the victim itself",
    About(("decode",), ("tables", "lengths", "out.decodes")),
)
"""The victim-newest probe's hint where the victim was right and the decode after it was not."""

_NO_RULE = Hint("the requests admitted differ from the reference's", About())
"""A probe's hint where what yours did breaks none of the rules the probe knows for certain:
about no place, so a report shows the place and the difference instead."""

BUILD = (
    "from servelab.kv.blocks import BlockManager\n"
    "from servelab.kv.scheduler import Sequence\n"
    "from servelab.kv.sim import emit_tokens"
)


class _Sequences:
    """``Sequence`` as the probes' lines use it (``Sequence.dummy``), keeping each one made."""

    def __init__(self) -> None:
        self.made: dict[int, Sequence] = {}

    def dummy(self, seq_id: int, prompt_len: int, max_new_tokens: int) -> Sequence:
        seq = Sequence.dummy(seq_id, prompt_len=prompt_len, max_new_tokens=max_new_tokens)
        self.made[seq_id] = seq
        return seq


class SchedulerScript(Script):
    """A :class:`Script` on a fresh scheduler over a reference block manager."""

    def __init__(self, impl: Any, num_blocks: int, block_size: int, watermark: int) -> None:
        self.sequences = _Sequences()
        classes = {**REPLAY.namespace(impl), "Sequence": self.sequences}
        super().__init__(classes, graded_names(REPLAY, impl))
        self(f"bm = BlockManager(num_blocks={num_blocks}, block_size={block_size})")
        self(f"sched = Scheduler(bm, watermark={watermark})")

    @property
    def bm(self) -> Any:
        return self.ns["bm"]

    @property
    def sched(self) -> Any:
        return self.ns["sched"]

    @property
    def seqs(self) -> dict[int, Sequence]:
        return self.sequences.made

    def add(self, sid: int, prompt_len: int, max_new_tokens: int) -> None:
        self(
            f"sched.add(Sequence.dummy({sid}, prompt_len={prompt_len}, "
            f"max_new_tokens={max_new_tokens}))"
        )

    def step(self, emit: bool = True) -> StepOutput:
        self("out = sched.step()")
        out = self.ns["out"]
        if not isinstance(out, StepOutput):
            raise self.fail(f"step() returned {out!r}; it must return a StepOutput")
        if emit:
            self("emit_tokens(out)")
        return out

    def running(self) -> list[int]:
        return [s.seq_id for s in self.sched.running]

    def waiting(self) -> list[int]:
        return [s.seq_id for s in self.sched.waiting]

    def fail(
        self, message: str, rule: str | None = None, *, hint: str | None = None
    ) -> ProbeFailed:
        self.note(f"# running {self.running()}, waiting {self.waiting()}, free {self.bm.num_free}")
        return super().fail(message, rule, hint=hint)

    def expect(self, got: object, want: object, what: str, why: str = "") -> None:
        """Fail unless ``got == want``; ``why`` says why the reference gives ``want``."""
        if got != want:
            raise self.fail(f"{what} is {got!r}, expected {want!r}" + (f": {why}" if why else ""))


def _ids(items: Any) -> list[int]:
    return [getattr(x, "seq", x).seq_id for x in items]


# --- step 1: admission -------------------------------------------------------------------


def _rejects_too_large(impl: Any) -> None:
    s = SchedulerScript(impl, num_blocks=8, block_size=4, watermark=2)
    s.add(0, 20, 4)  # 24 tokens: 6 blocks, exactly num_blocks - watermark
    try:
        s.add(1, 20, 5)
    except RequestTooLarge:
        if s.waiting() != [0]:
            raise s.fail(
                f"after the rejected add, waiting is {s.waiting()!r}, expected [0]",
                hint=(
                    "a refused add() changes nothing: it checks the request's size before it "
                    "queues it, so a RequestTooLarge leaves waiting as it was"
                ),
            ) from None
        return
    raise s.fail(
        "a request of 20 + 5 = 25 tokens needs 7 blocks of 4, but a pool of 8 with watermark 2 "
        "can give it at most 6; add() returned normally instead of raising RequestTooLarge"
    )


def _watermark(impl: Any) -> None:
    s = SchedulerScript(impl, num_blocks=8, block_size=4, watermark=2)
    # (id, prompt, blocks, free after it): 1 leaves room above the watermark, 2 leaves exactly
    # the watermark free (both admitted), 3 would leave 1 (waits)
    plan = [(0, 16, 4, 4), (1, 4, 1, 3), (2, 4, 1, 2), (3, 4, 1, 1)]
    for sid, prompt, _, _ in plan:
        s.add(sid, prompt, 1)
    out = s.step(emit=False)
    admitted = _ids(out.prefills)
    if admitted != [0, 1, 2]:
        raise _watermark_failure(s, plan, admitted)
    s.expect(s.waiting(), [3], "waiting")
    s.expect(s.bm.num_free, 2, "free blocks after admission")


def _blocks(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"


def _watermark_failure(
    s: SchedulerScript, plan: list[tuple[int, int, int, int]], admitted: list[int]
) -> ProbeFailed:
    """What went wrong in the watermark probe, told from what yours did: the reference's
    arithmetic is labelled as the reference's, and a rule's hint is given only where what
    yours did breaks it whatever the cause (another cause gets the place and the difference)."""
    head = f"admitted is {admitted}, expected [0, 1, 2]"
    bare = [sid for sid in s.running() if not _holds_blocks(s, sid)]
    if bare:  # running without a block: not admitted, whatever out.prefills lists
        queues = f"running {s.running()}, waiting {s.waiting()}"
        return s.fail(f"{head}: yours put {bare} in running with no blocks ({queues})", hint=None)
    listed = listed_not_queued(admitted, s.running(), s.waiting(), [0, 1, 2])
    if listed is not None:
        return s.fail(f"{head}: {listed[0]}", hint=listed[1])
    order = [p[0] for p in plan]
    k = len(admitted)
    if admitted == order:
        return s.fail(
            f"{head}: in the reference sequence 3 waits, as it needs 1 block and would leave "
            "1 free, below the watermark 2"
        )
    if admitted != order[:k]:
        i = next((i for i, (a, o) in enumerate(zip(admitted, order, strict=False)) if a != o), None)
        if i is None:  # more prefills than requests: one reported twice
            return s.fail(
                f"{head}: the reference reports each admitted request once", hint=_NO_RULE
            )
        a, o = admitted[i], order[i]
        seen = (
            f"yours admitted sequence {a} ahead of sequence {o}, added before it"
            if o in admitted
            else f"yours admitted sequence {a} while sequence {o}, added before it, was not "
            "admitted"
        )
        return s.fail(f"{head}: {seen}; the reference admits in arrival order", hint=HINTS["fcfs"])
    sid, _, blocks, after = plan[k]
    before = blocks + after
    rel = "exactly the watermark 2" if after == 2 else "above the watermark 2"
    expected = (
        f"in the reference sequence {sid} needs {_blocks(blocks)} of the {before} free and "
        f"leaves {after}, {rel}, so it is admitted"
    )
    free = s.bm.num_free
    if free != before:
        differs = (
            f"yours has {_blocks(free)} free after admitting {admitted}, the reference {before}"
        )
        return s.fail(f"{head}: {differs}; {expected}", hint=Hint(differs, About()))
    if sid not in s.waiting():  # neither admitted nor waiting: yours dropped it
        return s.fail(
            f"{head}: {expected}; yours had the same {before} free, and sequence {sid} is "
            f"in neither running {s.running()} nor waiting {s.waiting()}",
            hint=None,
        )
    return s.fail(
        f"{head}: {expected}; yours had the same {before} free and left it waiting",
        hint=None if after == 2 else HINTS["admit-loop"],
    )


def _holds_blocks(s: SchedulerScript, sid: int) -> bool:
    """Whether the block manager holds a table for ``sid`` (a request admitted holds one)."""
    try:
        return bool(s.bm.block_table(sid))
    except Exception:
        return False


def _first_come_first_served(impl: Any) -> None:
    s = SchedulerScript(impl, num_blocks=8, block_size=4, watermark=0)
    s.add(0, 20, 1)  # 5 blocks -> 3 free
    s.add(1, 16, 1)  # 4 blocks: does not fit now
    s.add(2, 4, 1)  # 1 block: fits, but may not overtake sequence 1
    out = s.step(emit=False)
    admitted = _ids(out.prefills)
    listed = listed_not_queued(admitted, s.running(), s.waiting(), [0])
    if listed is not None:
        raise s.fail(f"admitted is {admitted}, expected [0]: {listed[0]}", hint=listed[1])
    if admitted != [0]:
        overtook = 2 in admitted and 1 not in admitted
        seen = "; yours admitted sequence 2 while sequence 1, added before it, was not"
        raise s.fail(
            f"admitted is {admitted}, expected [0]: in the reference sequence 0 takes 5 of "
            "the 8 blocks, sequence 1 (4 blocks) does not fit in the 3 left, and admission "
            f"stops there{seen if overtook else ''}",
            hint=None if overtook else _head_left(s, admitted, 8),
        )
    s.expect(s.waiting(), [1, 2], "waiting")


def _head_left(s: SchedulerScript, admitted: list[int], free: int) -> Hint:
    """The hint where yours admitted ``admitted`` and the reference more: the admit-loop rule
    where yours admitted nothing from a pool as free as the reference's (the head fits by the
    rule, and was left), else no rule (the place and the difference)."""
    if not admitted and s.bm.num_free == free:
        return HINTS["admit-loop"]
    return _NO_RULE


def _prefill_whole_prompt(impl: Any) -> None:
    s = SchedulerScript(impl, num_blocks=8, block_size=4, watermark=1)
    s.add(0, 6, 2)
    out = s.step(emit=False)
    got = [(p.seq.seq_id, p.num_tokens) for p in out.prefills]
    if dict(got).get(0, 6) == 6 and got != [(0, 6)]:
        # not a question of length: the request was not admitted, or not alone
        raise s.fail(
            f"prefills as (seq_id, num_tokens) is {got}, expected [(0, 6)]: in the reference "
            "sequence 0 needs 2 blocks of the 8 free and leaves 6, above the watermark 1, so "
            "it is admitted",
            hint=_head_left(s, [sid for sid, _ in got], 8),
        )
    s.expect(got, [(0, 6)], "prefills as (seq_id, num_tokens)")
    s.expect(s.bm.seq_len(0), 6, "bm.seq_len(0) after admission")
    s.expect(s.running(), [0], "running")


def _prefill_generated_too(impl: Any) -> None:
    """A request that already holds generated tokens (one added back after a preemption) is
    sized and prefilled at prompt + generated, in `fits` as in `allocate`."""
    s = SchedulerScript(impl, num_blocks=4, block_size=2, watermark=0)
    s("seq = Sequence.dummy(1, prompt_len=2, max_new_tokens=4)")
    s("for t in (5, 6, 7): seq.append_token(t)")
    s("sched.add(seq)")
    out = s.step(emit=False)
    got = [(p.seq.seq_id, p.num_tokens) for p in out.prefills]
    s.expect(got, [(1, 5)], "prefills as (seq_id, num_tokens)", "prompt 2 + 3 generated")
    s.expect(s.bm.seq_len(1), 5, "bm.seq_len(1) after admission", "prompt 2 + 3 generated")
    s = SchedulerScript(impl, num_blocks=4, block_size=2, watermark=0)
    s.add(0, 3, 1)  # 2 blocks -> 2 free
    s("seq = Sequence.dummy(1, prompt_len=2, max_new_tokens=4)")
    s("for t in (5, 6, 7): seq.append_token(t)")
    s("sched.add(seq)")
    out = s.step(emit=False)
    got = [(p.seq.seq_id, p.num_tokens) for p in out.prefills]
    s.expect(
        got,
        [(0, 3)],
        "prefills as (seq_id, num_tokens)",
        "in the reference sequence 1 holds 5 tokens (prompt 2 + 3 generated), which need 3 "
        "blocks, and only 2 are free after sequence 0",
    )
    s.expect(s.waiting(), [1], "waiting")


# --- step 2: decode and retire -------------------------------------------------------------


def _decode_oldest_first(impl: Any) -> None:
    s = SchedulerScript(impl, num_blocks=16, block_size=4, watermark=0)
    for sid, prompt in ((0, 3), (1, 5), (2, 2)):
        s.add(sid, prompt, 4)
    s.step()
    out = s.step()
    s.expect(_ids(out.decodes), [0, 1, 2], "decoded (each running sequence once, oldest first)")
    s.expect([s.bm.seq_len(i) for i in (0, 1, 2)], [4, 6, 3], "KV slots of sequences 0, 1, 2")
    s.expect(out.prefills, [], "prefills in a step with nothing waiting")


def _frees_finished(impl: Any) -> None:
    s = SchedulerScript(impl, num_blocks=8, block_size=4, watermark=0)
    s.add(0, 4, 2)
    s.add(1, 4, 6)
    s.step()  # prefill: 1 generated each
    s.step()  # decode: sequence 0 reaches its 2 tokens
    out = s.step()
    s.expect(_ids(out.finished), [0], "finished")
    s.expect(s.running(), [1], "running after sequence 0 finished")
    s.expect(s.bm.sequences(), [1], "bm.sequences() (sequence 0's blocks must be freed)")
    s.expect(s.bm.num_free, 6, "free blocks (8 minus sequence 1's 2)")


_NO_SKIP = Hint(
    "a decode that finds no free block is no reason to skip the sequence: at step 2 let "
    "OutOfBlocks from bm.append_slot reach the caller (step 3 preempts the newest instead); "
    "a sequence left out of out.decodes in silence loses its token",
    # the result too: at step 2 yours returns where the reference's call raises
    About(("decode",), ("out.decodes", RESULT)),
)


def _full_pool_raises(impl: Any) -> None:
    """A decode with no free block: the step-2 reference lets OutOfBlocks out of step(), a
    step-3 one preempts; a decode that skips the sequence hides the full pool."""
    s = SchedulerScript(impl, num_blocks=4, block_size=2, watermark=0)
    s.add(0, 4, 2)
    s.add(1, 2, 2)
    s.step()  # prefill: 3 blocks taken, 1 free; both sequences' blocks are full
    try:
        out = s.step(emit=False)
    except OutOfBlocks:
        return
    decoded = _ids(out.decodes)
    if 1 not in decoded and not out.preempted:
        raise s.fail(
            f"decoded is {decoded}, and step() returned without an error: sequence 0's "
            "decode takes the last free block and sequence 1 needs another, and its append_slot "
            "raises OutOfBlocks: the step-2 reference lets it reach the caller, the step-3 one "
            "preempts; neither skips sequence 1",
            hint=_NO_SKIP,
        )


# --- step 3: preemption --------------------------------------------------------------------


def _pressure(impl: Any) -> tuple[SchedulerScript, StepOutput]:
    """Two sequences fill a 2-block pool; a third waits. Sequence 0's decode needs a block."""
    s = SchedulerScript(impl, num_blocks=2, block_size=2, watermark=0)
    s.add(0, 2, 2)
    s.add(1, 2, 2)
    s.add(2, 1, 1)
    s.step()
    return s, s.step()


def _preempts_newest(impl: Any) -> None:
    s, out = _pressure(impl)
    s.expect(
        _ids(out.preempted),
        [1],
        "preempted",
        "in the reference sequence 0's append_slot finds no free block and the newest "
        "running, sequence 1, is preempted",
    )
    if _ids(out.decodes) != [0]:
        seen = preempted_not_queued(1, s.running(), s.waiting())
        if seen is not None:
            raise s.fail(f"decoded is {_ids(out.decodes)}, expected [0]: {seen}", hint=PREEMPTED)
        raise s.fail(
            f"decoded is {_ids(out.decodes)}, expected [0]: yours preempted sequence 1, as "
            "the reference does, and in the reference sequence 0 then decodes in the block "
            "sequence 1 gave back",
            hint=_RETRY,
        )


def _preempts_newest_however_long(impl: Any) -> None:
    """The newest running sequence holds more tokens than the one whose append fails: a victim
    chosen by its length (the fewest tokens, the asker itself here) is not the newest."""
    s = SchedulerScript(impl, num_blocks=3, block_size=2, watermark=0)
    s.add(0, 2, 3)
    s.add(1, 3, 3)
    s.step()
    out = s.step()
    s.expect(
        _ids(out.preempted),
        [1],
        "preempted",
        "in the reference sequence 0's append_slot finds no free block and the newest "
        "running, sequence 1, is preempted, though it holds more tokens",
    )
    s.expect(_ids(out.decodes), [0], "decoded")


def _requeues_at_front(impl: Any) -> None:
    s, out = _pressure(impl)
    s.expect(_ids(out.preempted), [1], "preempted")
    s.expect(s.waiting(), [1, 2], "waiting (the preempted sequence goes first)")


def _requeues_full_length(impl: Any) -> None:
    s, _ = _pressure(impl)
    seq = s.seqs[1]
    s.expect(seq.num_tokens, 3, "tokens of preempted sequence 1 (prompt 2 + 1 generated)")
    out = s.step()  # sequence 0 finishes and is retired; sequence 1 comes back
    got = [(p.seq.seq_id, p.num_tokens) for p in out.prefills]
    if dict(got).get(1, 3) == 3 and got != [(1, 3)]:
        # not a question of length: sequence 1 did not come back, or others came with it
        raise s.fail(
            f"prefills as (seq_id, num_tokens) is {got}, expected [(1, 3)]: in the reference "
            "sequence 0 finishes and frees its 2 blocks, and sequence 1, first in waiting, "
            "comes back with its 3 tokens in those 2 blocks",
            hint=_head_left(s, [sid for sid, _ in got], 2) if s.waiting()[:1] == [1] else _NO_RULE,
        )
    s.expect(got, [(1, 3)], "prefills as (seq_id, num_tokens): prompt + generated")
    s.expect(s.bm.seq_len(1), 3, "bm.seq_len(1) after re-admission")


def _probe(name: str, hint_id: str, run: Callable[[Any], None]) -> Probe:
    return Probe(name, HINTS[hint_id], run)


def _machine(
    stage: int, name: str, invariants: list[str], examples: int, steps: int
) -> MachineCheck:
    return MachineCheck(
        name=name,
        build=lambda impl: scheduler_machine(impl, stage=stage),
        invariants=[INVARIANTS[i] for i in invariants],
        hints=HINTS,
        max_examples=examples,
        step_count=steps,
    )


TOPIC = Topic(
    replay=REPLAY,
    checkpoint="scheduler",
    name="scheduler",
    title="The scheduler step: watermark admission, oldest-first decode, preempt the newest",
    steps=[
        Step(
            1,
            "admission: first come, first served, above the watermark",
            probes=[
                _probe("a request that can never fit is rejected", "too-large", _rejects_too_large),
                _probe("admission stops at the watermark", "watermark", _watermark),
                _probe("nobody overtakes the head of the queue", "fcfs", _first_come_first_served),
                _probe(
                    "a prefill covers the whole prompt", "prefill-length", _prefill_whole_prompt
                ),
                _probe(
                    "a request with generated tokens is sized at all its tokens",
                    "prefill-length",
                    _prefill_generated_too,
                ),
                *order_probes(SchedulerScript, 1),
            ],
            machine=_machine(
                1,
                "state machine: add, then one step",
                [
                    "too-large",
                    "fcfs",
                    "watermark",
                    "prefill-length",
                    "kv-slots",
                    "no-leak",
                    "fits-answer",
                ],
                examples=120,
                steps=12,
            ),
        ),
        Step(
            2,
            "decode oldest first, retire finished sequences",
            probes=[
                _probe(
                    "every running sequence decodes once, oldest first",
                    "decode-order",
                    _decode_oldest_first,
                ),
                _probe("finished sequences are freed", "finished-freed", _frees_finished),
                _probe(
                    "a finished sequence retires wherever it stands in running",
                    "finished-freed",
                    partial(frees_finished_anywhere, SchedulerScript),
                ),
                _probe(
                    "finished sequences are listed in running order",
                    "finished-freed",
                    partial(finished_in_running_order, SchedulerScript),
                ),
                _probe(
                    "the sequences left running keep their order",
                    "finished-freed",
                    partial(others_keep_their_order, SchedulerScript),
                ),
                Probe(
                    "a full pool is not hidden: no decode is skipped", _NO_SKIP, _full_pool_raises
                ),
            ],
            machine=_machine(
                2,
                "state machine: add and step in a pool that never runs out",
                [
                    "fcfs",
                    "watermark",
                    "decode-order",
                    "decode-then-admit",
                    "finished-freed",
                    "retire-early",
                    "kv-slots",
                    "no-leak",
                ],
                examples=100,
                steps=30,
            ),
        ),
        Step(
            3,
            "preempt the newest, recompute at prompt + generated",
            probes=[
                _probe(
                    "the newest running sequence is the victim", "victim-newest", _preempts_newest
                ),
                _probe(
                    "the newest is the victim, however many tokens it holds",
                    "victim-newest",
                    _preempts_newest_however_long,
                ),
                _probe(
                    "the victim goes back to the front of waiting",
                    "requeue-front",
                    _requeues_at_front,
                ),
                _probe(
                    "the victim is re-prefilled at prompt + generated",
                    "requeue-length",
                    _requeues_full_length,
                ),
                *order_probes(SchedulerScript, 3),
            ],
            machine=_machine(
                3,
                "state machine: add and step under memory pressure",
                [i for i in INVARIANTS if i != "liveness"],
                examples=100,
                steps=30,
            ),
        ),
    ],
)
