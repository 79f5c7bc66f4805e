"""Makes the copy-on-write copies after the decodes, which already read the empty copies."""

from servelab.grading.mistakes.engine import Correct

HINT = "after the decodes"
LIKE = "makes the copy-on-write copies after the decodes that write into them"


class Buggy(Correct):
    def execute(self, out):
        rows = self.decode(out.decodes)
        self.copy(
            [(d.slot.cow_src, d.slot.block) for d in out.decodes if d.slot.cow_src is not None]
        )
        for p in out.prefills:
            rows += self.prefill(p)
        return rows
