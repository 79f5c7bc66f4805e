"""Prefix-cache slips in places only one program visits: a lookup that changes the cache at a
hit that fails its check, a decode that passes `_register` its hash and tokens swapped or
slices the tokens one token early, a room test against the plain free blocks only."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, SequenceExists

TOPIC = "prefix-cache"
Lookup = checkpoint(TOPIC, 1)
Sharing = checkpoint(TOPIC, 2)
Prefix = checkpoint(TOPIC, 3)
ROOT = 0


class LookupForgetsMismatch(Lookup):
    """At a hit whose stored tokens differ, the lookup forgets that block ('self-healing')
    before it stops: a read changes the cache."""

    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            block = self.map.get(h)
            if block is None:
                break
            if self.tokens[block] != block_tokens:
                self._forget(block)
                break
            hits.append(block)
        return hits


class DecodeRegisterSwapped(Sharing):
    """A block a decode filled is registered as `_register(block, block_tokens, h)`."""

    def append_slot(self, seq, token_id):
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            table = self.tables[seq]
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            h = self._chain(tokens)[-1][0] if parent is None else hash((parent, block_tokens))
            self._register(slot.block, block_tokens, h)
        return slot


class DecodeTokensSlicedEarly(Sharing):
    """The filled block's tokens are sliced before the new token is appended: the block is
    named and stored with its tokens shifted by one."""

    def append_slot(self, seq, token_id):
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        block_tokens = tuple(tokens[-self.block_size :])
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            table = self.tables[seq]
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            h = self._chain(tokens)[-1][0] if parent is None else hash((parent, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


class RoomFromPlainFree(Prefix):
    """The need is tested against the plain free list (`len(self.free)`), not `_room(hits)`:
    a prompt that fits once evictable blocks are reclaimed is refused."""

    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


MISTAKES = {
    "a lookup forgets a mismatched hit": (1, LookupForgetsMismatch, {"_lookup"}),
    "a decode registers hash and tokens swapped": (2, DecodeRegisterSwapped, {"append_slot"}),
    "a decode slices its tokens early": (2, DecodeTokensSlicedEarly, {"append_slot"}),
    "room from the plain free list": (3, RoomFromPlainFree, {"allocate"}),
}
