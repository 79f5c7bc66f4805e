"""The rules the prefix-cache checks teach, in the words a failing check's hint shows, each with
the methods (and fields) it is about; apart from :mod:`servelab.grading.prefix_cache` to keep each
module short."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

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
    "lookup-now": Hint(
        "`_lookup` reads map as it is at the call: a block `_register` cached since an "
        "earlier lookup (now in map, findable by its hash) is found by the next one; keep no "
        "answer between calls",
        About(("_lookup",)),
    ),
    "lookup-reads": Hint(
        "a lookup only reads: _lookup returns the hits and changes no map entry, hash or "
        "stored tokens; a block whose tokens do not match stays cached for the prompt it holds",
        About(("_lookup",), ("hashed", "cached")),
    ),
    "free-order-return": Hint(
        "the plain free list is a queue: `_release` puts a block that holds no hash, once its "
        "refcount reaches 0, at its right end (append), behind the blocks already free",
        About(("_release",), ("free",)),
    ),
    "free-order-take": Hint(
        "the plain free list is a queue: `_alloc` takes a plain free block from its left end "
        "(popleft), the block that has been free longest",
        About(("_alloc",), ("free",)),
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
    ).before(
        3,
        "the hash map disagrees with the blocks' hashes: a block is in the map under "
        "the hash it holds, and only then (`_register` sets both, `_forget` clears both)",
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
    ).before(
        3,
        "did a block keep a hash it no longer holds the tokens of? A hash and its map "
        "entry go together (`_register`, `_forget`), and every hit checks the stored "
        "tokens",
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
    "kept-prompt": Hint(
        "`_chain` and `_lookup` only read the prompt: to cap or cut it, slice a new list "
        "(tokens[:n]); `del`, `pop` or `append` on the list given changes the caller's prompt",
        About(("_chain", "_lookup")),
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


def stored_tokens(bm: Any) -> dict[int, Any]:
    """Each block's stored tokens (``tokens[b]``), read off the object without a recorded
    line; empty where the skeleton's ``tokens`` cannot be read."""
    try:
        return {b: bm.tokens[b] for b in range(bm.num_blocks)}
    except Exception:
        return {}


def dropped_tokens(bm: Any, before: dict[int, Any], after: dict[int, Any]) -> Hint | None:
    """The hint where freeing kept blocks hashed on the evictable list but cleared the tokens
    they stored before the free, as read off the object; None where that is not what it shows."""
    try:
        parked = [b for b in bm.evictable() if bm.block_hash(b) is not None]
    except Exception:
        return None
    lost = [b for b in parked if before.get(b) is not None and b in after and after[b] is None]
    if not lost:
        return None
    b = lost[0]
    return Hint(
        f"`_release`: yours kept block {b} hashed on the evictable list but cleared the tokens "
        f"it stored (tokens[{b}] was {before[b]!r} before free_seq(0), None after): a parked "
        "block keeps its hash, its tokens and its map entry until it is reclaimed, so a later "
        "hit can be verified against them",
        About(("_release",)),
    )


def decode_misnamed(bm: Any, seq: int, tokens: list[int]) -> Hint | None:
    """The hint where the block decoding filled, the last of ``seq``'s table, is hashed, but
    under another hash than the learner's own ``_chain`` gives those tokens there (the hash a
    later prompt looks up); None where that is not what the object shows."""
    try:
        table = list(bm.block_table(seq))
        block, size = table[-1], bm.block_size
        h = bm.block_hash(block)
        with line_budget(LINES_PER_CALL):
            chain = copy.deepcopy(bm)._chain(list(tokens))
        at = len(table) - 1
        own = chain[at][0] if len(chain) > at and len(tokens) % size == 0 else None
    except (Exception, OutOfLines):
        return None
    if h is None or own is None:
        return None
    filled = tuple(tokens[-size:])
    if h == own:
        stored = _stored(bm, block)
        if stored is None or stored == filled:
            return None
        return Hint(
            f"`append_slot`: yours hashed block {block} under the right hash but stored its "
            f"tokens as {stored!r}, not {filled!r}: a hit is verified by comparing "
            "tokens[block] with the block's tokens as a tuple, so register exactly that tuple",
            About(("append_slot",)),
        )
    if h == filled and _registers_in_order(bm, block, own, filled):
        return Hint(
            f"`append_slot`: yours passed block {block}'s hash and tokens to `_register` in "
            f"the wrong order: hash[{block}] is its tokens {filled} and tokens[{block}] the "
            f"hash, while your `_register({block}, h, block_tokens)`, tried on a copy, stores "
            "them right: the call is _register(block, h, block_tokens), the hash first",
            About(("append_slot",)),
        )
    stored = _stored(bm, block)
    if isinstance(stored, tuple) and len(stored) == size and stored != filled:
        return Hint(
            f"`append_slot`: yours stored block {block}'s tokens as {stored}, but decoding "
            f"filled it with {filled} (and its hash is not the one your own `_chain` gives "
            "it): a filled block is named and stored by its own tokens, the sequence's last "
            "block_size tokens once this token is appended",
            About(("append_slot",)),
        )
    return Hint(
        f"`append_slot`: yours hashed block {block}, which decoding filled with {filled}, under "
        f"another hash than your own `_chain` gives that block at position {at} (the hash a "
        "later prompt with the same tokens looks up): a filled block's hash is "
        "hash((parent's hash, its own tokens)), its parent the block before it in the table",
        About(("append_slot",)),
    )


def _stored(bm: Any, block: int) -> Any:
    """The tokens the learner's object stores for ``block`` (None where it cannot be read)."""
    try:
        return bm.tokens[block]
    except Exception:
        return None


def _registers_in_order(bm: Any, block: int, h: Any, block_tokens: tuple[int, ...]) -> bool:
    """Whether the learner's ``_register``, called on a copy with ``block`` made private again,
    stores ``h`` as its hash and ``block_tokens`` as its tokens, as the arguments are ordered;
    and whether the object stored them the other way round (what a call with the two swapped
    leaves)."""
    try:
        if bm.tokens[block] != h:
            return False
        obj = copy.deepcopy(bm)
        obj.map.pop(obj.hash[block], None)
        obj.hash[block] = obj.tokens[block] = None
        with line_budget(LINES_PER_CALL):
            obj._register(block, h, block_tokens)
        return bool(obj.hash[block] == h and obj.tokens[block] == block_tokens)
    except (Exception, OutOfLines):
        return False


def parked_in_front(bm: Any, seq: int) -> Hint | None:
    """The hint where ``_release``, called on a copy for each block of ``seq``'s table, last
    first (as free_seq releases them), lists the evictable blocks in the order they were
    released last first: each one freed went to the front; None where it does not."""
    try:
        obj = copy.deepcopy(bm)
        table = list(obj.block_table(seq))
        with line_budget(LINES_PER_CALL):
            for block in reversed(table):
                obj._release(block)
        order = list(obj.evictable())
    except (Exception, OutOfLines):
        return None
    if len(table) < 2 or order != table:
        return None
    calls = " and then ".join(f"_release({b})" for b in reversed(table))
    return Hint(
        f"`_release`: yours, called on a copy as {calls}, lists evictable() as {order}: the "
        "block freed last went to the front of the reclaim order. A freed cached block joins "
        "the back, so the least recently freed is reclaimed first",
        About(("_release",)),
    )
