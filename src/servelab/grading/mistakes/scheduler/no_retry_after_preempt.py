"""After preempting a victim the decode loop moves on instead of retrying the sequence that needed
the block."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode

HINT = "retry"
LIKE = "moves on after a preemption instead of retrying the decode that needed the block"


class Buggy(Correct):
    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.preempt(self.running.pop(), out)
                i += 1
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1
