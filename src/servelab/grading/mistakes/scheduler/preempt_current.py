"""Preempts the sequence whose append_slot failed instead of the newest running one."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode

HINT = "newest"
LIKE = "preempts the sequence whose append_slot failed instead of the newest running one"


class Buggy(Correct):
    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.preempt(self.running.pop(i), out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1
