"""The rules the prefix-cache checks teach, in the words a failing check's hint shows, each with
the methods (and fields) it is about; apart from :mod:`servelab.grading.prefix_cache` to keep each
module short."""

from __future__ import annotations

from servelab.grading.about import About, Hint

HINTS: dict[str, Hint] = {
    "chain-shape": Hint(
        "_chain names each full block only (len(tokens) // block_size of them), as "
        "the pair (h, block_tokens) with block_tokens a tuple of that block's tokens",
        About(("_chain",)),
    ),
    "register": Hint(
        "_register(block, h, block_tokens) sets map[h] = block, hash[block] = h and "
        "tokens[block] = block_tokens",
        About(("_register",), ("hashed", "cached")),
    ),
    "duplicate": Hint(
        "_register leaves a block private when its hash is already cached: map keeps "
        "the first block, and the second gets no hash (else freeing one would remove the other's "
        "entry)",
        About(("_register",), ("hashed", "cached")),
    ),
    "verify": Hint(
        "a hit must be verified: map[h] is a hit only if that block's stored tokens equal "
        "the block's tokens (a hash can collide)",
        About(("_lookup",)),
    ),
    "free-list": Hint(
        "a block is on the free list twice, or free and held at once: a block whose "
        "refcount reaches 0 goes to the evictable list if it holds a hash, else to the free "
        "list — never both",
        About(("_release", "_alloc"), ("free", "reclaim order")),
    ),
    "refcount-matches-tables": Hint(
        "a block's refcount counts the tables holding it: a hit must raise it like a fork does",
        About(("_claim",), ("refcounts",)),
    ),
    "table-length": Hint(
        "a table holds ceil(len / block_size) blocks, cached or new",
        About(("allocate", "append_slot"), ("tables", "lengths")),
    ),
    "cache-map": Hint(
        "the hash map disagrees with the blocks' hashes: when a cached block is reclaimed "
        "(`_forget`), delete its entry from the hash map and clear the block's hash",
        About(("_forget", "_alloc"), ("cached", "hashed")),
    ),
    "evictable": Hint(
        "`_release`: a cached block freed by its last holder goes on the evictable "
        "LRU (and only then); free_list() lists plain free blocks first",
        About(("_release",), ("reclaim order", "free")),
    ),
    "stale-hash": Hint(
        "did a reclaimed block keep its stale hash? Clear the block's hash and its map entry "
        "when an evictable block is reused, and check the stored tokens on every hit",
        About(("_forget", "_alloc", "_lookup"), ("hashed", "cached"), ("reclaim order",)),
    ),
    "wrong-data": Hint(
        "a hit served a block whose contents differ from the prompt: did a stale hash or map "
        "entry survive reuse? Verify the stored tokens on every hit",
        About(("_lookup", "_forget")),
    ),
    "hit-count": Hint(
        "a hit is a block whose whole prefix is cached: chain each block's hash over "
        "the previous block's hash, compare the stored tokens, and stop at the first miss",
        About(("_chain", "_lookup")),
    ),
    "hit-cap": Hint(
        "`_lookup` caps hits at (len - 1) // block_size blocks: the last prompt token "
        "is always computed, its logits start decoding",
        About(("_lookup",)),
    ),
    "chain": Hint(
        "a block's hash must chain over the previous block's hash, so one cached block "
        "never answers for the same tokens at another place in another prefix",
        About(("_chain",)),
    ),
    "own-tokens": Hint(
        "`allocate` keeps its own copy of the prompt (seq_tokens[seq] = list(token_ids)): the "
        "caller's list is not the manager's, and may change after the call",
        About(("allocate",)),
    ),
    "decode-fill": Hint(
        "when decoding fills a block (`append_slot`), cache it as a prompt block "
        "is: hash it on the chain and register it, so a later prompt with the same tokens hits it",
        About(("append_slot",), ("hashed", "cached")),
    ),
    "absent-hash": Hint(
        "a hash that map does not hold is a miss: `map.get(h)` gives None, and no block's "
        "stored tokens are read or verified for it",
        About(("_lookup",)),
    ),
    "first-miss": Hint(
        "`_lookup` stops at the first miss: a block after a missing one follows a "
        "prefix that is not cached",
        About(("_lookup",)),
    ),
    "freed-again": Hint(
        "a block freed, hit and freed again is the most recently freed: it goes to "
        "the back of the reclaim order (last time freed, not first time)",
        About(("_release", "_claim", "allocate"), ("reclaim order",)),
    ),
    "lru-eviction": Hint(
        "reclaim cached blocks only when no plain free block is left, and the "
        "least recently freed first",
        About(("_alloc",), ("reclaim order", "free")),
    ),
    "expected-error": Hint(
        "raise the documented error: OutOfBlocks, UnknownSequence or SequenceExists",
        About(("allocate", "append_slot", "free_seq", "fork", "_room")),
    ),
    "exception-safety": Hint(
        "check that the request fits before claiming hits or taking blocks",
        About(("allocate", "_room")),
    ),
    "exception": Hint(
        "a call raised an unexpected error; the repro above shows which",
        About(),
    ),
}
