"""The rules the kv-offload probes check, in the words a failing check's hint shows, each with
the methods (and fields) it is about."""

from __future__ import annotations

from servelab.grading.about import About, Hint
from servelab.grading.kv_offload_terms import (
    bytes_term_differs,
    latency_term_differs,
    own_numbers_missed,
)

HINTS: dict[str, Hint] = {
    "pinned": Hint(
        "a chunk that a lookup pinned must not be evictable until its retrieve completes: "
        "can_evict is False while pin_count > 0 (LMCache's can_evict: not pinned and "
        "ref_count == 1)",
        About(("can_evict",)),
    ),
    "referenced": Hint(
        "a chunk still referenced by a GPU transfer must not be evicted or freed: can_evict "
        "is False while ref_count > 1",
        About(("can_evict", "remove", "_choose_victims")),
    ),
    "counted": Hint(
        "pins and references are counts: two lookups pin a chunk twice, and one "
        "unpin leaves it pinned",
        About(("pin", "unpin", "ref", "unref"), ("pins", "refs")),
    ),
    "never-below-zero": Hint(
        "an unpin (or unref) without a matching pin must raise and leave the count at 0",
        About(("unpin", "unref"), ("pins", "refs")),
    ),
    "miss": Hint(
        "a `put` that cannot make room is a miss: return None and change nothing",
        About(("put", "_choose_victims")),
    ),
    "policy": Hint(
        "LRU refreshes a chunk on every hit (`get` moves it to the end); FIFO never does",
        About(("get",), ("keys",)),
    ),
    "no-more": Hint(
        "`put` evicts in policy order only until the chunk fits, and no more",
        About(("put", "_choose_victims"), ("keys", "used")),
    ),
    "decide-first": Hint(
        "`put` decides whether eviction can make room before evicting anything: "
        "a miss must evict nothing",
        About(("put", "_choose_victims")),
    ),
    "bounded-wait": Hint(
        "the busy wait of `put` retries at most `wait` times, pausing with _sleep() "
        "before each retry, and then returns None (a miss)",
        About(("put",)),
    ),
    "retry": Hint(
        "each retry must look for room again: a chunk unpinned during the pause can be evicted now",
        About(("put", "_choose_victims")),
    ),
    "too-large": Hint(
        "a chunk larger than the whole tier raises ChunkTooLarge (a ValueError): no "
        "eviction or wait can make room",
        About(("put",)),
    ),
    "cascade": Hint(
        "store cascades down: what the first tier evicts goes into the tier below",
        # a cascade needs a chunk in the first tier to evict: of an empty one it says nothing
        About(("store", "_cascade"), ("keys", "used"), needs=("cpu.keys",)),
    ),
    "promote": Hint(
        "retrieve copies a lower tier's hit up into the CPU tier whenever it fits the tier "
        "at all (len(payload) <= capacity), a chunk of exactly its size included",
        About(("retrieve",), ("keys",)),
    ),
    "dropped": Hint(
        "a victim the tier below cannot take (its put returns None) is dropped: _cascade "
        "goes on with `tier.put(...) or []`, and the store still succeeded",
        About(("store", "_cascade"), ("keys",)),
    ),
    "prefix": Hint(
        "lookup pins the longest prefix of the keys that some tier holds, and stops at "
        "the first key no tier has",
        About(("lookup",), ("pins",)),
    ),
    "promote-pinned": Hint(
        "a retrieve that unpins before promoting lets a chunk it still reads be evicted: keep "
        "every chunk of the lookup pinned (each read under a reference) until all are read "
        "and promoted, then unpin",
        About(("retrieve",), ("pins", "keys")),
    ),
    "write-first": Hint(
        "`put` reads the victims' payloads and writes the new copy before it drops any "
        "victim: a write that fails leaves the tier as it was",
        About(("put",), ("keys", "used")),
    ),
    "write-path": Hint(
        "`DiskTier._write` returns the path of the chunk's own file (`self.path(key)`), "
        "which `_read` and `_drop` use later",
        About(("DiskTier._write",), ("files",)),
    ),
    "remove-held": Hint(
        "`remove` refuses a chunk a transfer reads or a lookup pinned: it raises ChunkInUse "
        "while can_evict refuses, and changes nothing",
        About(("remove",), ("keys", "used")),
    ),
    "temp-left": Hint(
        "`DiskTier._write` leaves one file per chunk, the chunk's own (`self.path(key)`), "
        "and nothing else: a temporary file is moved over it with os.replace",
        About(("DiskTier._write",), ("files",)),
    ),
    "file-left": Hint(
        "a chunk that leaves a tier, evicted or removed, takes its copy with it: `_drop` "
        "deletes a disk chunk's file",
        About(("_discard", "remove"), ("files",)),
    ),
    "absent": Hint(
        "can_evict is False for a chunk that is not in the tier: it has no tier reference "
        "(ref_count 0), and the rule asks for ref_count == 1",
        About(("can_evict",)),
    ),
    "torn": Hint(
        "a crash during the disk write leaves the chunk file torn: write a temporary file in "
        "the same directory, flush and fsync it, then os.replace it over the chunk's name",
        About(("DiskTier._write",), ("files",)),
    ),
    "unsynced": Hint(
        "flush the temporary file and fsync it before os.replace: after a power cut a rename can "
        "be on the disk without the bytes it names, and fsync (or fdatasync) puts them there",
        About(("DiskTier._write",), ("files",)),
    ),
    "release": Hint(
        "release drops each of its lookup's pins once, in the tier the lookup found the "
        "chunk in, and nothing more: another lookup's pin on the same chunk stays",
        About(("release",), ("pins",)),
    ),
    "release-keeps": Hint(
        "release reads the caller's found list and leaves it as it was (the caller may "
        "retrieve or log it after): walk it with a for loop, without pop, remove or clear",
        About(("release",)),
    ),
    "held-bytes": Hint(
        "held_bytes counts each chunk once: a chunk promoted into the CPU tier "
        "keeps its disk copy, and counting both is counting its bytes twice",
        About(("held_bytes",), ("held_bytes",)),
    ),
    "held-bytes-sum": Hint(
        "held_bytes is the sum of the sizes of the distinct chunks the node holds: each chunk "
        "counted once, whichever tiers hold a copy",
        About(("held_bytes",), ("held_bytes",)),
    ),
    "attention": Hint(
        "recompute_seconds: recompute is 2 FLOPs per parameter per token plus "
        "attention over every earlier position (4 · layers · d_model · i at position i): the "
        "attention term dominates long prompts",
        About(("recompute_seconds",)),
    ),
    "kv-bytes": Hint(
        "load_seconds: KV bytes per token = 2 (K and V) · layers · kv_heads · head_dim "
        "· bytes_per_value",
        About(("load_seconds",), holds=bytes_term_differs),
    ),
    "latency": Hint(
        "load_seconds: a load pays the link's latency once per chunk request "
        "(chunk_tokens tokens), not per token and not once in all",
        About(("load_seconds",), holds=latency_term_differs),
    ),
    "own-numbers": Hint(
        "use the hierarchy's own model, flops, links and chunk_tokens: a grader "
        "(or a deployment) sets them",
        About(("recompute_seconds", "load_seconds"), holds=own_numbers_missed),
    ),
    "worth-loading": Hint(
        "worth_loading is load_seconds < recompute_seconds for those tokens",
        About(("worth_loading",)),
    ),
    "changed-on-error": Hint(
        "a call that raises must change nothing",
        About(("put", "pin", "unpin", "ref", "unref", "remove")),
    ),
    "pin-refused": Hint(
        "pin of a chunk that is not resident raises (ChunkNotFound, a KeyError)",
        About(("pin",)),
    ),
    "ref-refused": Hint(
        "ref of a chunk that is not resident raises (ChunkNotFound)",
        About(("ref",)),
    ),
    "count-returned": Hint(
        "pin/unpin return the pin count after the call, ref/unref the "
        "ref_count after it (1 for the tier's own reference, plus the transfers)",
        About(("pin", "unpin", "ref", "unref")),
    ),
    "error-type": Hint(
        "raise the notebook's error: ChunkNotFound for an absent chunk, "
        "ChunkNotPinned / ChunkNotReferenced for an unpin / unref below zero, ChunkInUse for a "
        "remove of a held chunk, ChunkTooLarge for a chunk larger than the tier",
        About(("get", "put", "pin", "unpin", "ref", "unref", "remove")),
    ),
    "count-not-use": Hint(
        "a count is not a use: ref/unref (like pin/unpin) change a chunk's counts only, "
        "never its place in the policy order",
        About(("ref", "unref"), ("keys",)),
    ),
    "promote-order": Hint(
        "retrieve promotes the chunks it read in the lookup's order, so the CPU tier's "
        "LRU order follows the prefix",
        About(("retrieve",), ("keys",)),
    ),
    "read-then-promote": Hint(
        "retrieve reads every found chunk first (a read from the CPU tier is a use there, "
        "which LRU refreshes) and only then promotes the lower tiers' hits: a chunk just "
        "promoted is the CPU tier's most recently used",
        About(("retrieve",), ("keys",)),
    ),
    "read-is-use": Hint(
        "retrieve reads each chunk with its tier's `get`: a read from disk is a use there, "
        "which LRU refreshes",
        About(("retrieve",), ("keys",)),
    ),
    "promote-once": Hint(
        "retrieve promotes only a chunk the CPU tier does not hold now (a store may have "
        "put it there since the lookup): a put of a resident key is a use",
        About(("retrieve",), ("keys",)),
    ),
    "miss-bounded": Hint(
        "the busy wait never returned: when every chunk is pinned, a wait "
        "without a bound spins forever",
        About(("put",)),
    ),
}


#: What holds the chunk a remove must refuse, as the remove probe says it, and its rule.
REMOVE_HOLDS = {
    "ref": ("a transfer still reads", "remove-held"),
    "pin": ("a lookup pinned", "remove-held"),
}
