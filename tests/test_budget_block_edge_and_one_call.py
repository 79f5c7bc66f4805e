"""Token-budget sentences proven by re-runs of the learner's ``admit``: a chunk cut back to a
block edge, and one request admitted per call; and where a learner's Python error was raised
below their own line. Each graded end to end on a real slip, with a look-alike where the
sentence must not appear."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.readings.budget_one_call import one_per_call
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import BudgetStep, Chunk
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import Sequence

TOPIC = "token-budget"
Chunked = checkpoint(TOPIC, 2)
EDGE = "a block edge (block_size 4), and run again with"
ONE = "yours admits one request per call"
INSIDE = "inside the code that line called"


def _admit(self: Any, out: Any, budget: int, *, size_rule: Any = None, once: bool = False) -> None:
    while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
        seq = self.waiting[0]
        hit = self.cached_tokens(seq)
        n = min(seq.num_tokens - hit, budget)
        if size_rule is not None:
            n = size_rule(self, seq, hit, n)
            if n == 0:
                break
        try:
            self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
        except OutOfBlocks:
            break
        self.waiting.popleft()
        self.running.append(seq)
        samples = hit + n == seq.num_tokens
        out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
        self.computed[seq.seq_id] = hit + n
        budget -= n
        if once:
            return


def _to_edge(self: Any, seq: Any, hit: int, n: int) -> int:
    if hit + n < seq.num_tokens:
        return n - (hit + n) % self.bm.block_size
    return n


class CutsToABlockEdge(Chunked):
    """A chunk that cannot take the rest of its prompt is cut back to a block edge."""

    def admit(self, out: Any, budget: int) -> None:
        _admit(self, out, budget, size_rule=_to_edge)


class ChunkAtMostABlock(Chunked):
    """No chunk longer than a block: it ends at a block edge on the failing call by chance."""

    def admit(self, out: Any, budget: int) -> None:
        _admit(self, out, budget, size_rule=lambda s, seq, hit, n: min(n, s.bm.block_size))


class OneAdmittedPerCall(Chunked):
    """Admits one request per call: an `if` where a `while` belongs."""

    def admit(self, out: Any, budget: int) -> None:
        _admit(self, out, budget, once=True)


class ChargesThreeTimesOver(Chunked):
    """Charges each chunk three times its tokens: the budget, not the call, stops it."""

    def admit(self, out: Any, budget: int) -> None:
        _admit(self, out, budget // 3)


class AllocatesTheChunkOnly(Chunked):
    """Allocates token_ids[hit:hit + n]: the table is too short for slots()."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[hit : hit + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class IndexesPastItsList(Chunked):
    """Reads the chunk's slots one past their end, on its own line."""

    def admit(self, out: Any, budget: int) -> None:
        before = len(out.scheduled)
        _admit(self, out, budget)
        if len(out.scheduled) > before and not out.scheduled[-1].samples:
            last = out.scheduled[-1]
            print(last.slots[last.num_tokens])


def _hint(impl: type) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, 2, quiet=True)
    return str(failed.value).split("hint: ", 1)[1]


def test_a_chunk_cut_back_to_a_block_edge_is_named() -> None:
    hint = _hint(CutsToABlockEdge)
    assert "yours gave request 1 4 of its 20 tokens to run" in hint
    assert f"yours ends it at position 4, {EDGE} 6 and with 9 of budget" in hint


def test_a_chunk_at_an_edge_by_chance_is_not_said_to_be_cut_to_one() -> None:
    hint = _hint(ChunkAtMostABlock)
    assert "a chunk takes min(tokens still to run, budget left)" in hint
    assert EDGE not in hint


def test_one_request_per_call_is_named() -> None:
    hint = _hint(OneAdmittedPerCall)
    assert hint.startswith(f"start at your `admit`: {ONE}")
    assert "it admits request 0 alone, and called once more" in hint


def _rerun(cls: type, sched: Any) -> Any:
    """``cls``'s admit run on a copy of ``sched`` with budget ``b``: (chunks, returned, copy)."""

    def ran(budget: int) -> tuple[list[Any], Any, Any]:
        obj, out = copy.deepcopy(sched), BudgetStep()
        obj.__class__ = cls
        returned = obj.admit(out, budget)
        return list(out.scheduled), returned, obj

    return ran


def test_an_admit_stopped_by_its_budget_is_not_said_to_take_one_per_call() -> None:
    bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)
    sched = ChargesThreeTimesOver(bm, max_num_batched_tokens=10, max_num_seqs=4)
    sched.add(Sequence.from_prompt(0, [1, 2, 3], max_new_tokens=2))
    sched.add(Sequence.from_prompt(1, [7, 8, 9, 10], max_new_tokens=2))
    theirs = [(0, 3), (1, 4)]
    assert len(_rerun(ChargesThreeTimesOver, sched)(10)[0]) == 1  # one admitted, as below
    assert one_per_call(sched, 10, theirs, _rerun(ChargesThreeTimesOver, sched)) is None
    one = copy.deepcopy(sched)
    one.__class__ = OneAdmittedPerCall
    assert one_per_call(one, 10, theirs, _rerun(OneAdmittedPerCall, one)) is not None


def test_an_error_raised_below_the_learners_line_shows_that_line_too() -> None:
    hint = _hint(AllocatesTheChunkOnly)
    assert "it raised IndexError: list index out of range" in hint
    assert f"{INSIDE}: `return [table[p // size] * size + p % size" in hint
    assert hint.split(f"{INSIDE}: ", 1)[1].split(";")[0].endswith("in `slots`")


def test_an_error_raised_on_the_learners_own_line_shows_no_code_under_it() -> None:
    hint = _hint(IndexesPastItsList)
    assert "IndexError" in hint and "print(last.slots[last.num_tokens])" in hint
    assert INSIDE not in hint
