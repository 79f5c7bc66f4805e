"""Never makes the copy-on-write copies, so a fresh copy of a shared block holds no KV."""

from servelab.grading.mistakes.engine import Correct

HINT = "copy-on-write"
LIKE = "never makes the copy-on-write copies append_slot asks for"


class Buggy(Correct):
    def execute(self, out):
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows += self.prefill(p)
        return rows
