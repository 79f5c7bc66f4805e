"""Mistake: allocate takes blocks one by one and fails halfway (not all or nothing)."""

from servelab.grading.mistakes.block_manager import Correct

HINT = "all or nothing"
LIKE = "takes blocks one by one and fails halfway: allocate is not all or nothing"


class Buggy(Correct):
    def allocate(self, seq, n_tokens):
        self._new(seq)
        need = -(-n_tokens // self.block_size)
        self.tables[seq] = []
        self.lens[seq] = n_tokens
        for _ in range(need):
            self.tables[seq].append(self._alloc())  # raises OutOfBlocks midway
