"""The room check forgets that a hit on an evictable block takes that block off the free
count."""

from servelab.grading.mistakes.prefix_cache import Correct
from servelab.kv.blocks import OutOfBlocks, SequenceExists

HINT = "claimed"
LIKE = (
    "checks for room without subtracting the evictable blocks that its own hits claimed, so an "
    "allocate can run out of blocks halfway"
)


class Buggy(Correct):
    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self.num_free:  # the hits on evictable blocks are counted as free too
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            if self.ref[block] == 0:
                del self.evictable_lru[block]
            self.ref[block] += 1
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size
