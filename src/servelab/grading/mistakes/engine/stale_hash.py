"""Reclaims an evictable block without forgetting its hash: the old prefix still finds it."""

from servelab.grading.mistakes.engine import BlockManager, Correct
from servelab.kv.blocks import OutOfBlocks

HINT = "stale"
LIKE = "reclaims an evictable cached block without forgetting its stale hash (nano-vllm #163)"


class KeepsHash(BlockManager):
    def _alloc(self):
        if self.free:
            block = self.free.popleft()
        elif self.evictable_lru:
            block, _ = self.evictable_lru.popitem(last=False)  # its map entry stays
        else:
            raise OutOfBlocks("no free block")
        self.ref[block] = 1
        return block


class Buggy(Correct):
    block_manager_class = KeepsHash
