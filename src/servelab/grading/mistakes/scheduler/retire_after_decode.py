"""step() retires finished sequences after decoding, so each finished one decodes a token
too many."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import StepOutput

HINT = "after decoding"
LIKE = "retires finished sequences after decoding instead of before, so each decodes once more"


class Buggy(Correct):
    def step(self):
        out = StepOutput()
        self.decode(out)
        self.retire(out)
        self.admit(out)
        return out
