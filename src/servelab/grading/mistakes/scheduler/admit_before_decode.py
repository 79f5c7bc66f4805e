"""step() admits first and decodes after, so a new sequence decodes in the step of its prefill."""

from servelab.grading.mistakes.scheduler import Correct
from servelab.kv.scheduler import StepOutput

HINT = "before decoding"
LIKE = "admits waiting requests before decoding the running ones"


class Buggy(Correct):
    def step(self):
        out = StepOutput()
        self.retire(out)
        self.admit(out)
        self.decode(out)
        return out
