"""Readings of which end of a queue a scheduler's call works from, proven by re-runs.

An ``admit`` that takes the newest waiting request first is told apart from one that only
puts what it admits in another order: yours is run again on fresh schedulers of its own class
whose waiting requests all fit, or only two of three fit, and the reading speaks only where
yours admits the newest in both and leaves the oldest waiting. A ``decode`` that skips a
sequence whose append found no free block is told from a re-run that records each
``bm.append_slot`` and what it raised.
"""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.blocks import BlockManager, OutOfBlocks
from servelab.kv.scheduler import Sequence, StepOutput

__all__ = ["admits_newest_first", "skips_a_full_decode"]


def _admitted(d: Difference, num_blocks: int) -> tuple[list[int], list[int]] | None:
    """Your admit on a fresh scheduler of your class (block size 4, watermark 1) whose
    waiting holds requests 0, 1 and 2 of one block each: the ids it put in running and the
    ids it left waiting; None when that fails."""
    try:
        sched = type(d.subject)(BlockManager(num_blocks=num_blocks, block_size=4), watermark=1)
        sched.waiting.clear()
        sched.waiting.extend(Sequence.dummy(i, 4, 1) for i in range(3))
        with line_budget(LINES_PER_CALL):
            sched.admit(StepOutput())
        return [s.seq_id for s in sched.running], [s.seq_id for s in sched.waiting]
    except (Exception, OutOfLines):
        return None


def admits_newest_first(d: Difference) -> str | None:
    """Your admit takes waiting from its back: with room for all of waiting [0, 1, 2] it
    admits 2, 1, 0 in that order, and with room for two it admits 2 and 1 and leaves 0, the
    oldest, waiting. (One that only puts each admitted request at the front of running
    admits 0 and 1 there and leaves 2.)"""
    if d.method != "admit" or not {"running", "waiting"} & d.differ:
        return None
    if getattr(d.subject, "waiting", None) is None:
        return None
    every = _admitted(d, num_blocks=4)  # 3 requests + watermark 1
    two = _admitted(d, num_blocks=3)  # room for two of them
    if every != ([2, 1, 0], []) or two != ([2, 1], [0]):
        return None
    return (
        "yours admits the newest waiting request first: on a fresh scheduler of yours with "
        "waiting [0, 1, 2] and room for all three, yours admitted 2, then 1, then 0; with room "
        "for two, it admitted 2 and 1 and left 0, the oldest, waiting. Take requests from the "
        "front of waiting, the oldest first (waiting[0], waiting.popleft()), not from its back "
        "(pop())"
    )


def _appends(d: Difference) -> tuple[list[tuple[Any, bool]], StepOutput, Any] | None:
    """Your decode, run again on a copy of the scheduler as it was, with each
    ``bm.append_slot`` recorded as (seq_id, whether it raised OutOfBlocks); the step output
    and the copy it ran on. None when the call raises or runs too long."""
    try:
        obj = copy.deepcopy(d.subject)
        bm = obj.bm
        calls: list[tuple[Any, bool]] = []
        append = bm.append_slot

        def recorded(seq_id: Any, *rest: Any) -> Any:
            try:
                slot = append(seq_id, *rest)
            except OutOfBlocks:
                calls.append((seq_id, True))
                raise
            calls.append((seq_id, False))
            return slot

        bm.append_slot = recorded
        out = StepOutput()
        with line_budget(LINES_PER_CALL):
            obj.decode(out)
        return calls, out, obj
    except (Exception, OutOfLines):
        return None


def skips_a_full_decode(d: Difference) -> str | None:
    """Your decode returned, and on a re-run a sequence's append_slot raised OutOfBlocks,
    nobody was preempted, and that sequence stays running without a Decode: it was skipped."""
    if d.method != "decode" or d.i_raised:
        return None
    ran = _appends(d)
    if ran is None:
        return None
    calls, out, obj = ran
    if out.preempted:
        return None
    decoded = {getattr(getattr(x, "seq", None), "seq_id", None) for x in out.decodes}
    running = [getattr(s, "seq_id", None) for s in getattr(obj, "running", ())]
    failed = [sid for sid, raised in calls if raised]
    skipped = [s for s in dict.fromkeys(failed) if s in running and s not in decoded]
    if not skipped:
        return None
    sid = skipped[0]
    said = (
        f"yours skipped sequence {sid}: its bm.append_slot raised OutOfBlocks (no free "
        "block), yours caught the error, and sequence "
        f"{sid} stays running with no Decode in this step while nobody was preempted"
    )
    if d.they_raised:  # a reference that lets the error out: step 2
        return (
            f"{said}; at this step let OutOfBlocks from bm.append_slot reach the caller "
            "(step 3 preempts instead): a sequence left out in silence loses its token"
        )
    return (
        f"{said}; on OutOfBlocks preempt the newest running sequence (running.pop()) and "
        "retry the same sequence's append, until it gets a block or is itself the victim"
    )


def _recorded_run(d: Difference) -> tuple[list[tuple[str, Any, str]], StepOutput, Any] | None:
    """Your decode, run again on a copy of the scheduler as it was, with each
    ``bm.append_slot`` and ``bm.free_seq`` recorded in order as (call, seq_id, the error it
    raised or ""), the step output and the copy; None when the copy cannot be made or the
    call runs too long. An error the call lets out ends the record there."""
    try:
        obj = copy.deepcopy(d.subject)
    except Exception:
        return None
    bm = getattr(obj, "bm", None)
    if bm is None:
        return None  # no scheduler at hand (a difference read without its object)
    events: list[tuple[str, Any, str]] = []

    def recording(name: str) -> Any:
        inner = getattr(bm, name)

        def recorded(seq_id: Any, *rest: Any) -> Any:
            try:
                result = inner(seq_id, *rest)
            except Exception as exc:
                events.append((name, seq_id, type(exc).__name__))
                raise
            events.append((name, seq_id, ""))
            return result

        return recorded

    bm.append_slot, bm.free_seq = recording("append_slot"), recording("free_seq")
    out = StepOutput()
    try:
        with line_budget(LINES_PER_CALL):
            obj.decode(out)
    except OutOfLines:
        return None
    except Exception:
        pass
    return events, out, obj


def _events(d: Difference) -> list[tuple[str, Any, str]] | None:
    """The calls of ``_recorded_run``, in order; None where it gives none."""
    ran = _recorded_run(d)
    return None if ran is None else ran[0]


def retried_its_own_victim(d: Difference) -> str | None:
    """On a re-run, a sequence's append_slot raised OutOfBlocks, yours then freed that same
    sequence (it was the newest: the victim), and the very next call asked append_slot for
    it again: the retry after a preemption did not stop when the asker was the victim."""
    events = _events(d)
    if not events:
        return None
    for i in range(len(events) - 2):
        (c1, s1, e1), (c2, s2, e2), (c3, s3, e3) = events[i : i + 3]
        asked_again = c3 == "append_slot" and e3 not in ("", "OutOfBlocks")
        failed_then_freed = c1 == "append_slot" and e1 == "OutOfBlocks" and c2 == "free_seq"
        if failed_then_freed and not e2 and s1 == s2 == s3 and asked_again:
            return (
                f"sequence {s1}'s append_slot found no free block, yours preempted "
                f"sequence {s1} itself (bm.free_seq({s1})) and then asked "
                f"bm.append_slot for it again, which raised {e3}: when the sequence "
                "asking is itself the victim, stop retrying: it holds no blocks now and "
                "waits to be prefilled again; retry only while the victim is another"
            )
    return None


def _served_before_an_older_retry(
    events: list[tuple[str, Any, str]], sid: Any, order: list[Any]
) -> tuple[Any, Any] | None:
    """Sequence ``sid``'s last append_slot before yours freed it succeeded, and the call just
    before that free was a failed append_slot of an older sequence (earlier in running) whose
    first failed ask came before ``sid`` was served: that older asker and the victim its
    first failed ask freed (None when none was freed right after it); None otherwise."""
    freed = next((i for i, (c, s, e) in enumerate(events) if c == "free_seq" and s == sid), None)
    if freed is None or freed == 0:
        return None
    own = [i for i, (c, s, _) in enumerate(events[:freed]) if c == "append_slot" and s == sid]
    if not own or events[own[-1]][2]:
        return None  # never asked, or its own last ask raised: not served before the free
    call, asker, error = events[freed - 1]
    if call != "append_slot" or error != "OutOfBlocks" or asker == sid:
        return None
    if asker not in order or sid not in order or order.index(asker) > order.index(sid):
        return None  # not an older sequence
    first = next(i for i, e in enumerate(events) if e == ("append_slot", asker, "OutOfBlocks"))
    if first > own[-1]:
        return None  # the asker's first failed ask came after this one was served
    after = events[first + 1] if first + 1 < len(events) else None
    victim = after[1] if after and after[0] == "free_seq" and not after[2] else None
    return asker, victim


def decoded_a_victim(d: Difference) -> str | None:
    """Your decode took the reference's victims, and run again on a copy it lists in
    out.decodes a sequence it also lists in out.preempted and no longer holds in running.
    Where that sequence's own last append_slot before yours freed it raised OutOfBlocks, it
    decoded its own victim; where it succeeded and the free came from an older sequence's
    retry, yours served it while the older one waited for its retry."""
    if d.method != "decode" or d.i_raised or "out.decodes" not in d.differ:
        return None
    if d.mine.get("out.preempted") != d.theirs.get("out.preempted"):
        return None  # another victim: the victim rule speaks first
    ran = _recorded_run(d)
    if ran is None:
        return None
    events, out, obj = ran
    victims = {getattr(v, "seq_id", None) for v in out.preempted}
    running = {getattr(s, "seq_id", None) for s in getattr(obj, "running", ())}
    decoded = [getattr(getattr(x, "seq", None), "seq_id", None) for x in out.decodes]
    both = [s for s in decoded if s is not None and s in victims and s not in running]
    if not both:
        return None
    sid = both[0]
    freed = next((i for i, (c, s, e) in enumerate(events) if c == "free_seq" and s == sid), None)
    own = [e for c, s, e in events[: freed or 0] if c == "append_slot" and s == sid]
    if own and own[-1] == "OutOfBlocks":
        return (
            f"yours listed sequence {sid} in out.decodes and also preempted it in this call "
            "(it left running and waits again): a sequence that is itself the victim gets no "
            "Decode; it has no slot in this step and is prefilled again when it is readmitted"
        )
    order = [getattr(s, "seq_id", None) for s in getattr(d.subject, "running", ())]
    found = _served_before_an_older_retry(events, sid, order)
    if found is None:
        return None
    asker, victim = found
    freed_first = f" and yours then preempted sequence {victim}" if victim is not None else ""
    ranks = [order.index(s) for s in decoded if s in order]
    shown = ""
    if ranks != sorted(ranks):
        shown = f"; yours decoded {decoded} where running, oldest first, was {order}"
    return (
        f"yours served sequence {sid} (its bm.append_slot succeeded and it got a Decode) "
        f"while older sequence {asker} was still waiting for its retry: {asker}'s "
        f"bm.append_slot had found no free block{freed_first}; {asker}'s later retry "
        f"preempted {sid}{shown}. Decode goes oldest first: a sequence whose append finds no "
        "block preempts the newest and asks again at once, before any newer sequence is "
        "served, so a sequence already decoded is never a victim in that step"
    )


def _fits_with_running(d: Difference, running: list[Any]) -> Any:
    """Your fits, asked the call's question again on a copy whose running list is
    ``running`` (the block manager untouched: the same free blocks); None when it fails."""
    try:
        obj = copy.deepcopy(d.subject)
        obj.running = running
        with line_budget(LINES_PER_CALL):
            return obj.fits(*d.args)
    except (Exception, OutOfLines):
        return None


def fits_waives_the_watermark_when_idle(d: Difference) -> str | None:
    """Your fits said yes where the reference says no, with nothing running; asked again with
    one (dummy) sequence running and the same free blocks, it says no: the watermark is kept
    only while something runs."""
    if d.method != "fits" or d.returned("mine") != "True" or d.returned("theirs") != "False":
        return None
    if getattr(d.subject, "running", None) != [] or len(d.args) != 1:
        return None
    if _fits_with_running(d, []) is not True:
        return None
    if _fits_with_running(d, [Sequence.dummy(10**6, 1, 1)]) is not False:
        return None
    return (
        f"yours answers fits({d.args[0]}) True with nothing running, and False from the same "
        "free blocks once one sequence runs: the watermark holds whether or not anything "
        "runs (num_free - needed >= watermark), since the next step's decodes need it"
    )
