"""A request whose extend found no free block and was left running, the latest: told with the
chunk a re-run on a copy shows it got (a chunk cut to the free blocks is named as the cut),
and with "no chunk this step" only where it got none."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint, grade
from servelab.grading import GradeFailure
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

T3 = checkpoint("token-budget", 3)

CUT = "never shrinking the chunk to what the free blocks hold"
NO_CHUNK = "with no chunk this step"


def _report(impl: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("token-budget", impl, 3, quiet=True)
    return str(failed.value)


class CutToTheFreeBlocks(T3):
    """After a failed extend, runs the chunk cut to the tokens the free blocks hold; preempts
    only when not one token fits."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                size = self.bm.block_size
                fits = self.bm.blocks_needed(start) * size - start + self.bm.num_free * size
                if 0 < fits < n:
                    n = fits
                    slots = self.extend(seq, start, n)
                else:
                    victim = self.running.pop()
                    self.preempt(victim, out)
                    if victim is seq:
                        return budget
                    continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class KeepsTheLatestAsker(T3):
    """After a failed extend of the latest running request, stops the step with it still
    running and no chunk for it; any other asker preempts the latest, as the rule does."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                if self.running[-1] is seq:
                    return budget
                self.preempt(self.running.pop(), out)
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


def test_a_chunk_cut_to_the_free_blocks_is_told_as_the_chunk_it_ran() -> None:
    report = _report(CutToTheFreeBlocks)
    assert "yours ran a chunk of" in report and "raised OutOfBlocks (seen on a copy)" in report
    assert CUT in report and NO_CHUNK not in report, report


def test_an_asker_left_without_a_chunk_keeps_its_sentence() -> None:
    report = _report(KeepsTheLatestAsker)
    assert NO_CHUNK in report and "yours ran a chunk of" not in report, report
