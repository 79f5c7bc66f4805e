"""Runs the prefills before the decodes, so a prompt can hit a block whose KV is written later."""

from servelab.grading.mistakes.engine import Correct

HINT = "before the decodes"
LIKE = (
    "runs the step's prefills before the decodes, so a prompt can read a block before the "
    "decodes write it"
)


class Buggy(Correct):
    def execute(self, out):
        self.copy(
            [(d.slot.cow_src, d.slot.block) for d in out.decodes if d.slot.cow_src is not None]
        )
        rows = []
        for p in out.prefills:
            rows += self.prefill(p)
        return rows + self.decode(out.decodes)
