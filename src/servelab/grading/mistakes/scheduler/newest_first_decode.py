"""Decodes the newest sequence first."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import Decode

HINT = "oldest first"
LIKE = "decodes the newest sequence first instead of oldest first"


class Buggy(Correct):
    def decode(self, out):
        for seq in reversed(list(self.running)):
            slot = self.bm.append_slot(seq.seq_id)
            out.decodes.append(Decode(seq, slot))
