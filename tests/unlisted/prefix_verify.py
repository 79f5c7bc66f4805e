"""Prefix-cache slips in what a lookup trusts and what allocate answers and names: the stored
tokens of the first hit checked only, a hit taken only while a table holds it, the cached
tokens counted as the prompt less its new blocks' slots, new blocks named by a chain of the
tokens after the hits, a filled block named only after a hashed parent."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, SequenceExists

TOPIC = "prefix-cache"
Lookup = checkpoint(TOPIC, 1)
Sharing = checkpoint(TOPIC, 2)
Prefix = checkpoint(TOPIC, 3)
ROOT = 0


class LookupVerifiesTheFirstHit(Lookup):
    """Compares the stored tokens of the first hit only (the chain vouches for the rest)."""

    def _lookup(self, tokens):
        hits = []
        chain = self._chain(tokens)[: (len(tokens) - 1) // self.block_size]
        for i, (h, block_tokens) in enumerate(chain):
            block = self.map.get(h)
            if block is None or (i == 0 and self.tokens[block] != block_tokens):
                break
            hits.append(block)
        return hits


class LookupSkipsUnheld(Prefix):
    """Counts a cached block as a hit only while a table holds it."""

    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            block = self.map.get(h)
            if block is None or self.ref[block] == 0 or self.tokens[block] != block_tokens:
                break
            hits.append(block)
        return hits


class CachedTokensLessNewSlots(Sharing):
    """Answers the prompt's tokens less the slots of the blocks it takes new."""

    def allocate(self, seq, token_ids):
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        super().allocate(seq, token_ids)
        need = -(-len(tokens) // self.block_size) - len(hits)
        return len(tokens) - need * self.block_size


class ChainOfTheRest(Sharing):
    """Names the new blocks by a chain over the tokens after the hits, from ROOT."""

    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            self._claim(block)
        table = list(hits)
        chain = self._chain(tokens[len(hits) * self.block_size :])
        for j in range(need):
            block = self._alloc()
            table.append(block)
            if j < len(chain):
                self._register(block, *chain[j])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class DecodeNamesAfterHashedParent(Sharing):
    """A decode names a filled block only when the block before it has a hash."""

    def append_slot(self, seq, token_id):
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            table = self.tables[seq]
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            if parent is not None:
                self._register(slot.block, hash((parent, block_tokens)), block_tokens)
        return slot


MISTAKES = {
    "lookup verifies the first hit only": (1, LookupVerifiesTheFirstHit, {"_lookup"}),
    "lookup skips unheld blocks": (3, LookupSkipsUnheld, {"_lookup"}),
    "cached tokens less new slots": (2, CachedTokensLessNewSlots, {"allocate"}),
    "new blocks chained from the hits' end": (2, ChainOfTheRest, {"allocate"}),
    "decode names after a hashed parent": (2, DecodeNamesAfterHashedParent, {"append_slot"}),
}
