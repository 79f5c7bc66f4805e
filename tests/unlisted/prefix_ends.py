"""Prefix-cache slips at the ends of a list: a chain that stops before the last full block of
a prompt of whole blocks, and an _alloc that never reclaims an evictable block."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks

TOPIC = "prefix-cache"
CHAIN = checkpoint(TOPIC, 1)
LRU = checkpoint(TOPIC, 3)


class ChainStopBeforeLastBlock(CHAIN):
    """`range(0, len(tokens) - block_size, block_size)`: a whole-block prompt loses its last."""

    def _chain(self, tokens):
        chain, parent = [], 0
        for start in range(0, len(tokens) - self.block_size, self.block_size):
            block_tokens = tuple(tokens[start : start + self.block_size])
            parent = hash((parent, block_tokens))
            chain.append((parent, block_tokens))
        return chain


class AllocPlainFreeOnly(LRU):
    """Step 2's _alloc kept at step 3: OutOfBlocks once the plain free list is empty."""

    def _alloc(self):
        if not self.free:
            raise OutOfBlocks("no free block")
        block = self.free.popleft()
        self.ref[block] = 1
        return block


MISTAKES = {
    "chain stops before the last block": (1, ChainStopBeforeLastBlock, {"_chain"}),
    "alloc takes plain free blocks only": (3, AllocPlainFreeOnly, {"_alloc"}),
}
