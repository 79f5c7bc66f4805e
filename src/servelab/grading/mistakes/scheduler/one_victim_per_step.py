"""Preempts at most one sequence per step: after that, a sequence that finds no block is
skipped for the step instead of preempting again."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode

HINT = "preempt again"
LIKE = (
    "preempts at most one sequence per step and skips the next one that finds no block; "
    "preempt again, as often as it takes"
)


class Buggy(Correct):
    def decode(self, out):
        i, preempted = 0, False
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                if preempted:
                    i += 1  # skipped for this step
                    continue
                preempted = True
                self.preempt(self.running.pop(), out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1
