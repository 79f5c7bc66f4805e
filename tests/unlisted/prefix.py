"""Prefix-cache slips, each on the notebook's own classes."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, SequenceExists

TOPIC = "prefix-cache"
Hashing = checkpoint(TOPIC, 1)
Sharing = checkpoint(TOPIC, 2)
Final = checkpoint(TOPIC, 3)


class RegisterForgetsTokens(Final):
    """Registers a block's hash but not its tokens, so no hit ever verifies."""

    def _register(self, block, h, block_tokens):
        if h not in self.map:
            self.map[h] = block
            self.hash[block] = h


class FreedToTheFront(Final):
    """Puts a freed cached block at the front of the reclaim order: the newest goes first."""

    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
                self.evictable_lru.move_to_end(block, last=False)
            else:
                self.free.append(block)


class HitsClaimedBeforeCheck(Final):
    """Takes its hits before checking the rest fits: an OutOfBlocks leaves them claimed."""

    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        for block in hits:
            if self.ref[block] == 0:
                del self.evictable_lru[block]
            self.ref[block] += 1
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self.num_free:
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class AllocateAnswersBlocks(Final):
    """Answers how many blocks were cached, where allocate reports cached tokens."""

    def allocate(self, seq, token_ids):
        return super().allocate(seq, token_ids) // self.block_size


class ClaimForgetsTheReference(Final):
    """Takes a cached block off the reclaim order but never counts the new holder."""

    def _claim(self, block):
        if self.ref[block] == 0:
            del self.evictable_lru[block]


class LookupCapsOnWholeBlocks(Final):
    """Caps the lookup at the prompt's whole blocks less one, whatever the prompt's length."""

    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens)[: len(tokens) // self.block_size - 1]:
            block = self.map.get(h)
            if block is None or self.tokens[block] != block_tokens:
                break
            hits.append(block)
        return hits


class RoomCountsHeldHits(Final):
    """Subtracts every hit from the room, held ones too, as if each took a free block."""

    def _room(self, hits):
        return self.num_free - len(hits)


class PartialBlockKeptReclaimable(Final):
    """Puts every freed block on the reclaim order, an unhashed partial block too."""

    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] == 0:
            self.evictable_lru[block] = None


class LookupComparesSlices(Final):
    """Verifies a hit against a slice of the prompt (a list) while the stored tokens are a
    tuple: no hit ever verifies."""

    def _lookup(self, tokens):
        hits, size = [], self.block_size
        for i, (h, _) in enumerate(self._chain(tokens)[: (len(tokens) - 1) // size]):
            block = self.map.get(h)
            if block is None or self.tokens[block] != tokens[i * size : (i + 1) * size]:
                break
            hits.append(block)
        return hits


class ChainNamesShifted(Final):
    """Computes every prefix's hash first, then names block i by hash i - 1 (ROOT for the
    first): an index slip that names each block by its parent."""

    def _chain(self, tokens):
        size = self.block_size
        blocks = [tuple(tokens[i * size : (i + 1) * size]) for i in range(len(tokens) // size)]
        names = [0]
        for block_tokens in blocks:
            names.append(hash((names[-1], block_tokens)))
        return [(names[i], block_tokens) for i, block_tokens in enumerate(blocks)]


class FreshPromptKeepsCallersList(Sharing):
    """Copies the prompt only when part of it is cached: a prompt with no hit keeps the
    caller's own list as its tokens, so the caller's later changes reach the manager."""

    def allocate(self, seq, token_ids):
        cached = super().allocate(seq, token_ids)
        if cached == 0:
            self.seq_tokens[seq] = token_ids
        return cached


class EvictableHitsRevivedLast(Final):
    """Claims the hits other sequences hold at once, but revives the evictable ones only after
    taking the new blocks, which may reclaim one of them first."""

    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        idle = [block for block in hits if self.ref[block] == 0]
        for block in hits:
            if block not in idle:
                self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        for block in idle:
            if block in self.evictable_lru:
                self._claim(block)
            else:
                self.ref[block] += 1
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class FreshBlockUnheld(Final):
    """Counts the holder only of a block reclaimed from the evictable list: a block taken from
    the plain free list is handed out at refcount 0."""

    def _alloc(self):
        if self.free:
            return self.free.popleft()
        if not self.evictable_lru:
            raise OutOfBlocks("no free block")
        block, _ = self.evictable_lru.popitem(last=False)
        self._forget(block)
        self.ref[block] = 1
        return block


class HashesPairedFromTheEnd(Final):
    """Pairs the new blocks with the prompt's hashes from the end: with a partial last block,
    that block takes the last full block's hash and the full one before it gets none."""

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
        new = [self._alloc() for _ in range(need)]
        for block, named in zip(
            reversed(new), reversed(self._chain(tokens)[len(hits) :]), strict=False
        ):
            self._register(block, *named)
        self.tables[seq] = list(hits) + new
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class ReleaseParksAHeldBlock(Final):
    """Puts a cached block on the evictable list while one table still holds it."""

    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] == 1 and self.hash[block] is not None:
            self.evictable_lru[block] = None
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
            else:
                self.free.append(block)


class ChainSlicesOneShort(Hashing):
    """Slices each block's tokens one short, `tokens[i * size : (i + 1) * size - 1]`: a block's
    name leaves out its last token."""

    def _chain(self, tokens):
        chain, parent = [], 0
        for i in range(len(tokens) // self.block_size):
            block_tokens = tuple(tokens[i * self.block_size : (i + 1) * self.block_size - 1])
            parent = hash((parent, block_tokens))
            chain.append((parent, block_tokens))
        return chain


class RoomKeepsOneSpare(Final):
    """Keeps one block spare in the room: a prompt that needs every free block is refused."""

    def _room(self, hits):
        return self.num_free - sum(1 for b in hits if self.ref[b] == 0) - 1


class RoomSharedAmongHits(Final):
    """Divides the free blocks among the hits, `num_free // (1 + len(hits))`: at num_free 2
    and one held hit its count is the one a held hit subtracted would give."""

    def _room(self, hits):
        return self.num_free // (1 + len(hits))


class RoomForTheWholePrompt(Sharing):
    """Checks the room for every block of the prompt, hits included, before taking the hits
    off: refuses a prompt that fits thanks to its hits."""

    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        total = -(-len(tokens) // self.block_size)
        if total > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {total} blocks")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), total):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class HitsClaimedByTheirCount(Final):
    """Claims each hit by raising its refcount itself, not through `_claim`: an evictable hit
    stays on the evictable list, where a new block can reclaim it."""

    def allocate(self, seq, token_ids):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
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


class LookupDefaultsToTheLastBlock(Hashing):
    """Reads a hash missing from map as block -1 and verifies that block's tokens: when the
    pool's last block caches the same tokens under another prefix, a miss reads as a hit."""

    def _lookup(self, tokens):
        hits = []
        for h, block_tokens in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            block = self.map.get(h, -1)
            if self.tokens[block] != block_tokens:
                break
            hits.append(block % self.num_blocks)
        return hits


MISTAKES = {
    "release parks a held block": (3, ReleaseParksAHeldBlock, {"_release"}),
    "evictable hits revived last": (3, EvictableHitsRevivedLast, {"allocate"}),
    "a fresh block handed out unheld": (3, FreshBlockUnheld, {"_alloc"}),
    "hashes paired from the end": (3, HashesPairedFromTheEnd, {"allocate"}),
    "hash registered without its tokens": (3, RegisterForgetsTokens, {"_register"}),
    "freed block first in the reclaim order": (3, FreedToTheFront, {"_release"}),
    "hits claimed before the fit check": (3, HitsClaimedBeforeCheck, {"allocate"}),
    "allocate answers blocks, not tokens": (3, AllocateAnswersBlocks, {"allocate"}),
    "a claimed hit keeps its refcount": (3, ClaimForgetsTheReference, {"_claim"}),
    "lookup capped a block short": (3, LookupCapsOnWholeBlocks, {"_lookup"}),
    "room counts held hits": (3, RoomCountsHeldHits, {"_room"}),
    "partial block kept reclaimable": (3, PartialBlockKeptReclaimable, {"_release"}),
    "lookup verifies against a slice": (3, LookupComparesSlices, {"_lookup"}),
    "chain names shifted by one": (3, ChainNamesShifted, {"_chain"}),
    "a fresh prompt keeps the caller's list": (2, FreshPromptKeepsCallersList, {"allocate"}),
    "chain slices one token short": (1, ChainSlicesOneShort, {"_chain"}),
    "room keeps one block spare": (3, RoomKeepsOneSpare, {"_room"}),
    "room shared among the hits": (3, RoomSharedAmongHits, {"_room"}),
    "room asked for the whole prompt": (2, RoomForTheWholePrompt, {"allocate"}),
    "hits claimed by their count": (3, HitsClaimedByTheirCount, {"allocate"}),
    "an absent hash read as the last block": (1, LookupDefaultsToTheLastBlock, {"_lookup"}),
}
