"""Prefix-cache slips in the hash a decode gives the block it fills, which no field shows:
over a parent with no hash (None), over the table's first block, or off by one."""

from servelab import checkpoint

TOPIC = "prefix-cache"
Sharing = checkpoint(TOPIC, 2)
ROOT = 0


def _filled(bm, seq, token_id):
    """The slot reserved and the token appended; the filled block's tokens when it is full."""
    bm._table(seq)
    slot = bm._reserve_slot(seq)
    tokens = bm.seq_tokens[seq]
    tokens.append(token_id)
    full = slot.offset == bm.block_size - 1
    return slot, tuple(tokens[-bm.block_size :]) if full else None


class DecodeHashesOverNone(Sharing):
    """Hashes a filled block over its parent's hash even where the parent has none (None),
    where the notebook computes the chain from the sequence's tokens."""

    def append_slot(self, seq, token_id):
        slot, block_tokens = _filled(self, seq, token_id)
        if block_tokens is not None:
            table = self.tables[seq]
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            self._register(slot.block, hash((parent, block_tokens)), block_tokens)
        return slot


class DecodeChainsOnTheFirstBlock(Sharing):
    """Hashes a filled block over the table's first block's hash, not the block before it."""

    def append_slot(self, seq, token_id):
        slot, block_tokens = _filled(self, seq, token_id)
        if block_tokens is not None:
            table = self.tables[seq]
            parent = self.hash[table[0]] if len(table) > 1 else ROOT
            if parent is None:
                h = self._chain(self.seq_tokens[seq])[-1][0]
            else:
                h = hash((parent, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


class DecodeHashOffByOne(Sharing):
    """Where the parent has no hash, names the filled block by the chain's hash plus one."""

    def append_slot(self, seq, token_id):
        slot, block_tokens = _filled(self, seq, token_id)
        if block_tokens is not None:
            table = self.tables[seq]
            parent = self.hash[table[-2]] if len(table) > 1 else ROOT
            if parent is None:
                h = self._chain(self.seq_tokens[seq])[-1][0] + 1
            else:
                h = hash((parent, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


MISTAKES = {
    "decode hashes over None": (2, DecodeHashesOverNone, {"append_slot"}),
    "decode chains on the first block": (2, DecodeChainsOnTheFirstBlock, {"append_slot"}),
    "decode hash off by one": (2, DecodeHashOffByOne, {"append_slot"}),
}
