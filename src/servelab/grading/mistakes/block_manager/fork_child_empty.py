"""fork shares the parent's blocks but starts the child at length zero."""

from servelab.grading.mistakes.block_manager import Correct

HINT = "length zero"
LIKE = "shares the parent's blocks on fork but starts the child at length zero"


class Buggy(Correct):
    def fork(self, parent, child):
        super().fork(parent, child)
        self.lens[child] = 0
