"""Prefix-cache slips in places only one program visits: a lookup past a hit that failed its
check, a decode that names the block it copied from, a plain free block put back in front,
a claim that forgets the hit's hash."""

from servelab import checkpoint

TOPIC = "prefix-cache"
Lookup = checkpoint(TOPIC, 1)
Sharing = checkpoint(TOPIC, 2)
Prefix = checkpoint(TOPIC, 3)
ROOT = 0


class UnverifiedHitSkipped(Lookup):
    """A hit whose stored tokens differ is skipped (`continue`) instead of ending the lookup:
    the blocks after it, chained over another prefix, still hit."""

    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            block = self.map.get(h)
            if block is None:
                break
            if self.tokens[block] != block_tokens:
                continue
            hits.append(block)
        return hits


class DecodeNamesTheOldBlock(Sharing):
    """Reads the table's last block before reserving the slot and names that block when the
    token fills it: after a copy-on-write it names the shared block it copied from."""

    def append_slot(self, seq, token_id):
        self._table(seq)
        before = self.tables[seq][-1] if self.tables[seq] else None
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            table = self.tables[seq]
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            if parent is None:
                h = self._chain(tokens)[-1][0]
            else:
                h = hash((parent, block_tokens))
            block = before if before is not None and slot.offset else slot.block
            self._register(block, h, block_tokens)
        return slot


class PlainFreeBlockInFront(Prefix):
    """Puts a freed block that holds no hash at the left end of the plain free list
    (appendleft): it is handed out again before the blocks that were free already."""

    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
            else:
                self.free.appendleft(block)


class ClaimForgetsTheHash(Prefix):
    """Takes an evictable hit off the evictable list and forgets its hash too, as reclaiming
    does: the block is held again but no longer cached."""

    def _claim(self, block):
        if self.ref[block] == 0:
            del self.evictable_lru[block]
            self._forget(block)
        self.ref[block] += 1


MISTAKES = {
    "an unverified hit skipped": (1, UnverifiedHitSkipped, {"_lookup"}),
    "a decode names the block it copied": (2, DecodeNamesTheOldBlock, {"append_slot"}),
    "a plain free block put in front": (3, PlainFreeBlockInFront, {"_release"}),
    "a claim forgets the hash": (3, ClaimForgetsTheHash, {"_claim"}),
}
