"""The report's line of the learner's method that made the difference, with the values it saw.

Under ``where:``, after the call and both outcomes, one line names the line of the learner's
own source after which the differing entry entered (or left) the field, or the ``return``
that returned a wrong value, with the plain names that line and the tests deciding it read.
It is shown only where it is a fact: never for a class without source, never where the
difference comes from a line the learner left out, the same on every run, and the trace it
runs under puts back whatever trace function was there.
"""

from __future__ import annotations

import sys
from typing import Any

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Prefill
from unlisted.offload_contract import RefReturnsTransfers

SCHEDULER = checkpoint("scheduler", 3)
CACHE = checkpoint("weight-cache", 5)
BUDGET = checkpoint("token-budget", 3)


class AdmitReadsFreeOnce(SCHEDULER):  # type: ignore[misc,valid-type]
    """Reads the free blocks once, before the first admission: a stale count admits more."""

    def admit(self, out: Any) -> None:
        free = self.bm.num_free
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_tokens
            if free - self.blocks_needed(n) < self.watermark:
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class PutKeepsStaleUsed(CACHE):  # type: ignore[misc,valid-type]
    """Reads `used` before a replacement releases the old size, and writes it back after."""

    def put(self, key: Any, value: Any, size: int) -> None:
        self._check_can_admit(key, size)
        used = self._used
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used = used + size


class EvictCountsInHelper(CACHE):  # type: ignore[misc,valid-type]
    """Counts an eviction in a helper of its own, adding the bytes in use, not the victim's."""

    def _evict(self, key: Any) -> None:
        self._count_eviction()
        size, _ = self._entries.pop(key)
        self._used -= size

    def _count_eviction(self) -> None:
        self.evictions += 1
        self.evicted_bytes += self._used


class PreemptKeepsComputed(BUDGET):  # type: ignore[misc,valid-type]
    """Never resets the victim's computed tokens: the line that should is missing."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)
        out.preempted.append(victim)


class ForLoopSkipsRetry(BUDGET):  # type: ignore[misc,valid-type]
    """Walks the running list with `for`: after a preemption the request is never retried."""

    def schedule_running(self, out: Any, budget: int) -> int:
        from servelab.kv.budget import Chunk

        for seq in self.running:
            if budget <= 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


def report(topic: str, impl: Any, step: int) -> str:
    try:
        grade(topic, impl, step, quiet=True)
    except GradeFailure as failure:
        return str(failure)
    raise AssertionError(f"{impl!r} passed")


def where_block(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    where:"))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("      "):
            break
        block.append(line.strip())
    return block


def test_a_stale_count_shows_the_line_and_the_value_it_read() -> None:
    block = where_block(report("scheduler", AdmitReadsFreeOnce, 3))
    assert block[0] == "    where: the difference starts in your `admit`"
    assert block[-1] == "at your line `self.waiting.popleft()`, where free = 8, n = 4"


def test_a_stale_local_shows_the_assignment_that_wrote_it_back() -> None:
    block = where_block(report("weight-cache", PutKeepsStaleUsed, 5))
    assert block[-1] == "at your line `self._used = used + size`, where used = 30, size = 50"


def test_a_line_in_a_helper_of_the_learners_names_the_helper() -> None:
    block = where_block(report("weight-cache", EvictCountsInHelper, 5))
    assert block[0] == "    where: the difference starts in your `_evict`"
    assert block[-1] == "at your line `self.evicted_bytes += self._used` in `_count_eviction`"


def test_a_wrong_return_value_shows_the_return_line() -> None:
    block = where_block(report("kv-offload", RefReturnsTransfers, 2))
    assert block[2] == "yours returned 1; refs {} -> {'a': 1}"
    assert block[-1] == "at your line `return self._refs[key]`, where key = 'a'"


def test_a_class_without_source_shows_no_line() -> None:
    source = (
        "class AdmitReadsFreeOnce(SCHEDULER):\n"
        "    def admit(self, out):\n"
        "        free = self.bm.num_free\n"
        "        while self.waiting:\n"
        "            seq = self.waiting[0]\n"
        "            n = seq.num_tokens\n"
        "            if free - self.blocks_needed(n) < self.watermark:\n"
        "                break\n"
        "            self.waiting.popleft()\n"
        "            self.bm.allocate(seq.seq_id, n)\n"
        "            self.running.append(seq)\n"
        "            out.prefills.append(Prefill(seq, n))\n"
    )
    names: dict[str, Any] = {"SCHEDULER": SCHEDULER, "Prefill": Prefill}
    exec(compile(source, "<string>", "exec"), names)
    block = where_block(report("scheduler", names["AdmitReadsFreeOnce"], 3))
    assert block[0] == "    where: the difference starts in your `admit`"
    assert block[-1].startswith("the reference returns None;")
    assert not any("at your line" in line for line in block)


def test_a_line_left_out_shows_no_line() -> None:
    """The reset the learner never wrote has no line: the queue line that makes the stale
    count visible, and the preemption the reference follows with a retry, are not it."""
    for impl in (PreemptKeepsComputed, ForLoopSkipsRetry):
        text = report("token-budget", impl, 3)
        assert "where: the difference starts in your" in text
        assert "at your line" not in text


def test_the_same_line_on_every_run() -> None:
    first = report("scheduler", AdmitReadsFreeOnce, 3)
    assert report("scheduler", AdmitReadsFreeOnce, 3) == first
    assert "at your line" in first


def test_the_trace_function_in_place_is_put_back() -> None:
    calls: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> None:
        calls.append(event)

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        text = report("weight-cache", PutKeepsStaleUsed, 5)
        after = sys.gettrace()
    finally:
        sys.settrace(before)
    assert after is tracer
    assert "at your line `self._used = used + size`" in text


def test_a_change_the_reference_makes_too_is_not_the_line() -> None:
    """`used += size` after an eviction left out, an eviction counted once more before the
    count the reference makes too, a block taken from the wrong victim: the line where the
    number goes wrong is not the slip."""
    from unlisted.offload_limits import PutKeepsVictimBytes
    from unlisted.scheduler import VictimHoldsTheMostTokens
    from unlisted.weights import EvictionCountedTwiceForOldest, EvictKeepsLast

    for topic, impl, step in (
        ("weight-cache", EvictKeepsLast, 2),
        ("weight-cache", EvictionCountedTwiceForOldest, 5),
        ("kv-offload", PutKeepsVictimBytes, 2),
        # a victim chosen wrongly: the retried append that takes its block is not the slip
        ("scheduler", VictimHoldsTheMostTokens, 3),
    ):
        text = report(topic, impl, step)
        assert "where: the difference starts in your" in text, text
        assert "at your line" not in text, text
