"""Preempts the running sequence with the highest id, taking ids for arrival order."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode

HINT = "highest id"
LIKE = "preempts the running sequence with the highest id instead of the newest to arrive"


class Buggy(Correct):
    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                victim = max(self.running, key=lambda s: s.seq_id)
                j = self.running.index(victim)
                self.preempt(self.running.pop(j), out)
                if j < i:
                    i -= 1
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1
