"""The report's line of the learner's method that made the difference, with the values it saw.

Under ``where:``, after the call and both outcomes, one line names the line of the learner's
own source after which the differing entry entered (or left) the field, or the ``return``
that returned a wrong value, with the plain names that line and the tests deciding it read.
It is shown only where it is a fact: never for a class without source, never where the
difference comes from a line the learner left out, the same on every run, and the trace it
runs under puts back whatever trace function was there.
"""

from __future__ import annotations

import linecache
import os
import sys
from typing import Any

import servelab.grading.faulty_line as faulty
from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Prefill
from unlisted.offload_contract import RefReturnsTransfers

SCHEDULER = checkpoint("scheduler", 3)
CACHE = checkpoint("weight-cache", 5)
HIERARCHY = checkpoint("kv-offload", 4)
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


class AdmitPopsWithStaleFree(SCHEDULER):  # type: ignore[misc,valid-type]
    """The stale count of `AdmitReadsFreeOnce`, with the request taken by `seq = popleft()`."""

    def admit(self, out: Any) -> None:
        free = self.bm.num_free
        while self.waiting:
            n = self.waiting[0].num_tokens
            if free - self.blocks_needed(n) < self.watermark:
                break
            seq = self.waiting.popleft()
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


class EvictCountsInAMethodOfItsOwn(CACHE):  # type: ignore[misc,valid-type]
    """Counts an eviction in a method of its own, adding the bytes in use, not the victim's."""

    def _evict(self, key: Any) -> None:
        self._count_eviction()
        size, _ = self._entries.pop(key)
        self._used -= size

    def _count_eviction(self) -> None:
        self.evictions += 1
        self.evicted_bytes += self._used


class WriteEndsWithANewline(HIERARCHY["DiskTier"]):  # type: ignore[misc,valid-type]
    """Ends each chunk's file with a newline, appended after the rename: a chunk reads back
    one byte longer."""

    def _write(self, key: Any, payload: bytes) -> Any:
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, final)
        with open(final, "ab") as f:
            f.write(b"\n")
        return final


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


def test_a_name_the_line_assigns_is_not_shown() -> None:
    """Before `seq = self.waiting.popleft()` runs, `seq` still holds the request of the last
    round, not the one the line takes."""
    block = where_block(report("scheduler", AdmitPopsWithStaleFree, 3))
    assert block[-1] == "at your line `seq = self.waiting.popleft()`, where free = 8, n = 4"


def test_a_for_header_shows_no_target_its_body_lines_do() -> None:
    """Read before the header runs, the target holds the last item; in the body, this one."""

    def admit(self: Any, out: Any) -> None:
        total = 0
        for seq in self.waiting:
            total += seq.num_tokens
        out.total = total

    code = admit.__code__
    first = code.co_firstlineno
    assert faulty._line(code, first + 2).names == ["self"]
    assert faulty._line(code, first + 3).names == ["seq", "self", "total"]
    assert faulty._line(code, first + 4).names == ["total", "out"]


def test_a_line_in_a_case_is_shown_alone() -> None:
    def evict(self: Any, key: Any) -> None:
        match self._entries.get(key):
            case (size, _) if size > 0:
                self._used -= size
            case None:
                raise KeyError(key)

    code = evict.__code__
    first = code.co_firstlineno
    line = faulty._line(code, first + 3)
    assert (line.text, line.names) == ("self._used -= size", ["key", "self", "size"])
    line = faulty._line(code, first + 1)
    assert (line.text, line.names) == ("match self._entries.get(key):", ["key", "self"])
    assert faulty._line(code, first + 2).text is None


def test_a_set_at_any_depth_is_shown_in_sorted_order() -> None:
    """A set iterates in an order of its own ({8, 1} gives 8 first; a set of words, the order
    the hash seed picks, which changes from run to run): each set is written sorted."""
    assert faulty._value({8, 1}) == "{1, 8}"
    assert faulty._value({"x": {8, 1}}) == "{'x': {1, 8}}"
    assert faulty._value([({8, 1}, set())]) == "[({1, 8}, set())]"
    assert faulty._value((frozenset({8, 1}), frozenset())) == "(frozenset({1, 8}), frozenset())"


def test_a_read_that_fails_in_the_reference_s_call_is_left_out(monkeypatch: Any) -> None:
    """A read of the fields that fails midway through the reference's call is left out, as
    one in the learner's call is: the line still stands on the others."""
    observed = faulty._Watch._observed
    counts: dict[int, int] = {}

    def failing_once(watch: Any) -> Any:
        if watch.codes is None:  # the reference's call: every line on the object
            counts[id(watch)] = counts.get(id(watch), 0) + 1
            if counts[id(watch)] == 3:
                return None
        return observed(watch)

    monkeypatch.setattr(faulty._Watch, "_observed", failing_once)
    block = where_block(report("scheduler", AdmitReadsFreeOnce, 3))
    assert max(counts.values()) >= 3  # the failing read happened
    assert block[-1] == "at your line `self.waiting.popleft()`, where free = 8, n = 4"


def test_a_stale_local_shows_the_assignment_that_wrote_it_back() -> None:
    block = where_block(report("weight-cache", PutKeepsStaleUsed, 5))
    assert block[-1] == "at your line `self._used = used + size`, where used = 30, size = 50"


def test_a_line_in_another_method_of_the_learners_names_that_method() -> None:
    block = where_block(report("weight-cache", EvictCountsInAMethodOfItsOwn, 5))
    assert block[0] == "    where: the difference starts in your `_evict`"
    assert block[-1] == "at your line `self.evicted_bytes += self._used` in `_count_eviction`"


def test_a_wrong_return_value_shows_the_return_line() -> None:
    block = where_block(report("kv-offload", RefReturnsTransfers, 2))
    assert block[2] == "yours returned 1; refs {} -> {'a': 1}"
    assert block[-1] == "at your line `return self._refs[key]`, where key = 'a'"


def test_a_file_written_in_a_temporary_folder_shows_its_line() -> None:
    """`_write` returns a path in the tier's own temporary folder, a new one on each copy the
    call runs again on: the path reads the same where the folder is all that differs."""
    block = where_block(report("kv-offload", {**HIERARCHY, "DiskTier": WriteEndsWithANewline}, 3))
    assert block[0] == "    where: the difference starts in your `DiskTier._write`"
    assert block[2] == (
        "yours returned PosixPath('<temporary folder>/a.chunk'); files {} -> {'a.chunk': 21}"
    )
    assert block[-1] == 'at your line `with open(final, "ab") as f:`'


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


def test_a_method_run_again_with_a_new_comment_shows_its_own_text() -> None:
    """A cell run again whose method differs only in a comment compiles to code that compares
    equal to the first: its line is still read from its own source."""
    shown = []
    for cell, comment in enumerate(("first", "second")):
        source = (
            "class AdmitReadsFreeOnce(SCHEDULER):\n"
            "    def admit(self, out):\n"
            "        free = self.bm.num_free\n"
            "        while self.waiting:\n"
            "            seq = self.waiting[0]\n"
            "            n = seq.num_tokens\n"
            "            if free - self.blocks_needed(n) < self.watermark:\n"
            "                break\n"
            f"            self.waiting.popleft()  # the {comment} cell\n"
            "            self.bm.allocate(seq.seq_id, n)\n"
            "            self.running.append(seq)\n"
            "            out.prefills.append(Prefill(seq, n))\n"
        )
        name = f"<cell {cell}>"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        try:
            names: dict[str, Any] = {"SCHEDULER": SCHEDULER, "Prefill": Prefill}
            exec(compile(source, name, "exec"), names)
            shown.append(where_block(report("scheduler", names["AdmitReadsFreeOnce"], 3))[-1])
        finally:
            del linecache.cache[name]
    assert shown == [
        f"at your line `self.waiting.popleft()  # the {comment} cell`, where free = 8, n = 4"
        for comment in ("first", "second")
    ]


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
