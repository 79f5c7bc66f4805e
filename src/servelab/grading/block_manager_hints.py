"""The rules the block-manager checks teach, in the words a failing check's hint shows, each with
the methods (and fields) it is about; apart from :mod:`servelab.grading.block_manager` to keep each
module short."""

from __future__ import annotations

from servelab.grading.about import RESULT, About, Hint

HINTS: dict[str, Hint] = {
    "free-list": Hint(
        "a block is free exactly when its refcount is 0 (free_seq must not ignore the "
        "refcount): release one reference per table entry, and put the block back on the free "
        "list when the count reaches 0, and only then",
        About(("_release", "free_seq"), ("free", "num_free", "refcounts")),
    ),
    "refcount-matches-tables": Hint(
        "every time a table gains or loses a block, its refcount must move with it "
        "(allocate, fork, free_seq, and append_slot when it copies a shared block)",
        About(("allocate", "fork", "free_seq", "_alloc", "_release"), ("refcounts",)),
    )
    .before(2, "every time a table gains or loses a block, its refcount must move with it")
    .before(
        3,
        "every time a table gains or loses a block, its refcount must move with it "
        "(allocate, free_seq, and append_slot when it takes a new block)",
    ),
    "table-distinct": Hint(
        "each entry of a table is a block of its own: a table never lists one block twice",
        About(("allocate", "append_slot"), ("tables",)),
    ),
    "table-length": Hint(
        "a table holds ceil(len / block_size) blocks: allocate on a boundary "
        "crossing, not before and not after",
        About(("allocate", "append_slot"), ("tables", "lengths")),
    ),
    "length": Hint(
        "a sequence's length counts its tokens: allocate sets it, and append_slot raises "
        "it by one on every call, whichever branch it takes (a new block, a copy, in place)",
        About(("allocate", "append_slot"), ("lengths",)),
    )
    .before(2, "a sequence's length counts its tokens: allocate sets it to n_tokens")
    .before(
        3,
        "a sequence's length counts its tokens: allocate sets it, and append_slot raises "
        "it by one on every call, whichever branch it takes (a new block or in place)",
    ),
    "free-order-take": Hint(
        "the free list is a queue: `_alloc` takes the block at its left end "
        "(popleft), the block that has been free longest",
        About(("_alloc",), ("free",)),
    ),
    "table-order": Hint(
        "allocate builds the table in the order `_alloc` hands the blocks out, left end of "
        "the free list first: logical block i is the i-th block taken",
        About(("allocate",), ("tables",)),
    ),
    "free-order-return": Hint(
        "the free list is a queue: `_release` puts a block whose refcount "
        "reaches 0 at its right end (append), behind the blocks already free",
        About(("_release",), ("free",)),
    ),
    "free-tail-first": Hint(
        "free_seq releases a table tail first (last block first): the block freed first is "
        "reused first, so a prefix cache keeps a prompt's shareable head longest",
        About(("free_seq",), ("free",)),
    ),
    "free-count": Hint(
        "num_free differs from the model's: was a block taken that was not needed (a "
        "full block copied?) or one never returned?",
        About((), ("num_free",)),
    ).before(
        3,
        "num_free differs from the model's: was a block taken that was not needed, or "
        "one never returned?",
    ),
    "boundary-allocation": Hint(
        "append_slot allocates only when len % block_size == 0; otherwise "
        "the token goes to offset len % block_size of the last block",
        About(("append_slot",), ("tables", "free", "num_free", RESULT)),
    ),
    "fork-shares": Hint(
        "fork must share the parent's blocks themselves (same ids), raising each "
        "refcount, not allocate new ones",
        About(("fork",), ("tables", "free", "num_free", "refcounts")),
    ),
    "fork-refcount": Hint(
        "fork must raise the refcount of every block it shares: two tables hold it",
        About(("fork",), ("refcounts",)),
    ),
    "fork-copies-table": Hint(
        "fork gives the child its own list (list(table)): sharing the parent's "
        "list object makes every block one sequence appends show up in the other's table",
        About(("fork",), ("tables",)),
    ),
    "cow-drop": Hint(
        "after copying a shared block, the writer drops its reference to the old one "
        "(release it), or the block leaks and its other holder keeps copying",
        About(("append_slot",), ("refcounts",)),
    ),
    "cow-full-block": Hint(
        "copy-on-write applies to the trailing partial block only; full blocks "
        "are never written again, so copying them turns a fork into a full copy",
        About(("append_slot",)),
    ),
    "cow-sole-owner": Hint(
        "only the first writer copies: after it drops its reference the other "
        "holder has refcount 1 and writes in place; decide by refcount, not by 'was forked'",
        About(("append_slot",)),
    ),
    "cow-missing": Hint(
        "a write into a partial block with refcount > 1 must copy it first "
        "(return cow_src) — otherwise the sibling sees the token",
        About(("append_slot",)),
    ),
    "write-isolation": Hint(
        "a write landed in a block another sequence reads: check refcounts "
        "before writing, and never hand out a block that is still in use",
        About(("append_slot", "_alloc")),
    ).before(
        3,
        "a write landed in a block another sequence holds: never hand out a block that "
        "is still in use",
    ),
    "expected-error": Hint(
        "raise the documented error: OutOfBlocks, UnknownSequence, SequenceExists or InvalidLength",
        About(("allocate", "append_slot", "fork", "free_seq", "_known", "_new")),
    ),
    "parent-first": Hint(
        "fork checks its parent before its child: an unknown parent raises UnknownSequence "
        "whatever the child is, a live child id included",
        About(("fork", "_known", "_new")),
    ),
    "room-is-free": Hint(
        "allocate compares the blocks needed with the free blocks (len(self.free)), not with "
        "the pool: a request the free list cannot hold raises OutOfBlocks and takes nothing",
        About(("allocate",), ("free", "num_free", "tables")),
    ),
    "refused-no-trace": Hint(
        "a refused allocate records nothing: check the room before setting the length or "
        "taking a block, so the refused sequence has no table and no length",
        About(("allocate",), ("lengths", "tables")),
    ),
    "freed-no-trace": Hint(
        "free_seq forgets the sequence whole, its length as well as its table (delete its lens "
        "entry): a freed id is unknown to every method, and nothing of it stays behind",
        About(("free_seq",), ("lengths", "tables")),
    ),
    "all-or-nothing": Hint(
        "allocate must check that enough blocks are free before taking any: all or nothing",
        About(("allocate",), ("free", "num_free")),
    ),
    "cow-release-before-allocate": Hint(
        "allocate the replacement block before releasing the shared "
        "one, so OutOfBlocks leaves the table and refcounts untouched",
        About(("append_slot",)),
    ),
    "exception-safety": Hint(
        "validate everything before changing anything, so a raised error "
        "leaves the manager exactly as it was",
        # about a state changed before a raise: a wrong error that changed nothing is not its
        About(
            ("allocate", "append_slot", "fork", "free_seq"),
            ("tables", "lengths", "refcounts", "free", "num_free"),
        ),
    ),
    "exception": Hint(
        "a call raised an unexpected error; the repro above shows which",
        About(),
    ),
}
