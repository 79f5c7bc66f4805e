"""Mistake: allocate takes blocks one by one and fails halfway (not all or nothing)."""

from servelab.grading.mistakes.block_manager.correct import BlockManager
from servelab.kv.blocks import SequenceExists

HINT = "all or nothing"
LIKE = "takes blocks one by one and fails halfway: allocate is not all or nothing"


class Buggy(BlockManager):
    def allocate(self, seq: int, n_tokens: int) -> None:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        need = -(-n_tokens // self.block_size)
        self.tables[seq] = []
        self.lens[seq] = n_tokens
        for _ in range(need):
            self.tables[seq].append(self._alloc())  # raises OutOfBlocks midway
