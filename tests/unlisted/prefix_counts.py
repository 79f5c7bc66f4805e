"""Prefix-cache slips in how a hit moves a refcount or the evictable LRU, and in how the chain
names a block: a hit that sets the count, a hit that takes the oldest evictable block off the
list, a lookup that reorders it, a chain named over the block's position too."""

from servelab import checkpoint

TOPIC = "prefix-cache"
Sharing, Final = checkpoint(TOPIC, 2), checkpoint(TOPIC, 3)


class ClaimSetsTheCountToOne(Final):
    """A hit gets refcount 1, as a new block does, whatever held it before."""

    def _claim(self, block):
        if self.ref[block] == 0:
            del self.evictable_lru[block]
        self.ref[block] = 1


class ClaimTakesTheOldest(Final):
    """Claiming an evictable hit pops the evictable LRU's oldest entry, not the hit."""

    def _claim(self, block):
        if self.ref[block] == 0:
            self.evictable_lru.popitem(last=False)
        self.ref[block] += 1


class LookupRefreshesEvictable(Final):
    """The lookup moves each evictable hit to the newest end of the evictable LRU."""

    def _lookup(self, tokens):
        hits = super()._lookup(tokens)
        for block in hits:
            if block in self.evictable_lru:
                self.evictable_lru.move_to_end(block)
        return hits


class ChainKeyedByPosition(Sharing):
    """Names each block over its position too: hash((parent, i, block_tokens))."""

    def _chain(self, tokens):
        chain, parent = [], 0
        for i in range(len(tokens) // self.block_size):
            block_tokens = tuple(tokens[i * self.block_size : (i + 1) * self.block_size])
            parent = hash((parent, i, block_tokens))
            chain.append((parent, block_tokens))
        return chain


MISTAKES = {
    "claim sets the count to one": (3, ClaimSetsTheCountToOne, {"_claim"}),
    "claim takes the oldest": (3, ClaimTakesTheOldest, {"_claim"}),
    "lookup refreshes evictable": (3, LookupRefreshesEvictable, {"_lookup"}),
    "chain keyed by position": (2, ChainKeyedByPosition, {"_chain"}),
}
