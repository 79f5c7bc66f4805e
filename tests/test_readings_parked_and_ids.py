"""Block-manager and prefix-cache reports that name what the first differing call shows: a copy
released in place of its source, a documented error raised on a valid call, a failed allocate
that leaves a half-recorded sequence, a parked block that forgets its hash or tokens, a prompt
block left unhashed. Each is shown on a real slip graded end to end, and not on a look-alike."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.mistakes import mistakes
from servelab.kv.blocks import InvalidLength, OutOfBlocks, SequenceExists, Slot

B3, B4 = checkpoint("block-manager", 3), checkpoint("block-manager", 4)
P2, P3 = checkpoint("prefix-cache", 2), checkpoint("prefix-cache", 3)


class _CopyReleasedNotSource(B3):  # type: ignore[misc]
    """Swaps the copy into the table, then releases table[-1]: the copy, not the shared block."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            cow_src = table[-1]
            table[-1] = self._alloc()
            self._release(table[-1])
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class _CopyCountedZero(B3):  # type: ignore[misc]
    """Look-alike: the copy's count is set to 0 by hand (never released: not on the free
    list), and the shared block is released as it should be."""

    def append_slot(self, seq: int) -> Any:
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            self.ref[new] = 0
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


def test_a_copy_released_in_place_of_its_source_is_told_from_the_fields() -> None:
    report, _ = failing_report("block-manager", _CopyReleasedNotSource, 3)
    assert "yours put the copy, block 2, in sequence 0's table yet back on the free" in (
        report.hint
    ), report.hint
    assert "left the shared block 1 at refcount 2" in report.hint, report.hint
    report, _ = failing_report("block-manager", _CopyCountedZero, 3)
    assert "refcount 0" in report.hint, report.hint
    assert "back on the free list" not in report.hint, report.hint


class _ForkChecksSwapped(B4):  # type: ignore[misc]
    """Checks the parent with _new and the child with _known."""

    def fork(self, parent: int, child: int) -> None:
        self._new(parent)
        self._known(child)
        super(B4, self).fork(parent, child)


def test_a_documented_error_on_a_valid_fork_names_the_ids_not_a_sharing_rule() -> None:
    report, _ = failing_report("block-manager", _ForkChecksSwapped, 4)
    assert "yours raised SequenceExists for fork(0, 1), though the child 1 is not" in (
        report.hint
    ), report.hint
    assert "not allocate new ones" not in report.hint, report.hint


class _ZeroTokensRefused(B4):  # type: ignore[misc]
    """Refuses a length of zero tokens as invalid (tests n <= 0)."""

    def allocate(self, seq: int, n_tokens: Any) -> None:
        self._new(seq)
        if not isinstance(n_tokens, int) or n_tokens <= 0:
            raise InvalidLength(f"bad length {n_tokens!r}")
        super(B4, self).allocate(seq, n_tokens)


def test_an_invalid_length_raised_for_a_valid_count_says_so() -> None:
    report, _ = failing_report("block-manager", _ZeroTokensRefused, 4)
    assert "yours raised InvalidLength for allocate(" in report.hint, report.hint
    assert "zero tokens is a valid length" in report.hint, report.hint


class _RollbackKeepsTheEntry(B4):  # type: ignore[misc]
    """Reserves the id with an empty table; on an error empties it but leaves the entry."""

    def allocate(self, seq: int, n_tokens: Any) -> None:
        self._new(seq)
        self.tables[seq] = []
        try:
            if not isinstance(n_tokens, int) or n_tokens < 0:
                raise InvalidLength(f"bad length {n_tokens!r}")
            if -(-n_tokens // self.block_size) > len(self.free):
                raise OutOfBlocks("no room")
            self.tables[seq] = [self._alloc() for _ in range(-(-n_tokens // self.block_size))]
            self.lens[seq] = n_tokens
        except Exception:
            self.tables[seq].clear()
            raise


def test_a_failed_allocate_that_leaves_a_half_recorded_sequence_is_placed() -> None:
    report, _ = failing_report("block-manager", _RollbackKeepsTheEntry, 4)
    assert "sequences() lists 1 while seq_len(1) raises KeyError" in report.text, report.text
    assert "start at your `allocate`" in report.hint, report.hint
    assert "a lookup of a key that is not there" not in report.hint, report.hint


class _ParksWithoutHash(P3):  # type: ignore[misc]
    """Parks a freed cached block on the evictable list but clears its hash."""

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
                self.hash[block] = None
            else:
                self.free.append(block)


class _ParksWithoutTokens(P3):  # type: ignore[misc]
    """Parks a freed cached block on the evictable list but clears its stored tokens."""

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
                self.tokens[block] = None
            else:
                self.free.append(block)


class _ParksAtTheFront(P3):  # type: ignore[misc]
    """Look-alike: parks a freed cached block at the front of the LRU, all of it kept."""

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
                self.evictable_lru.move_to_end(block, last=False)
            else:
                self.free.append(block)


class _ReleasesCachedToFree(P3):  # type: ignore[misc]
    """Look-alike: tests `block in self.map` (keys are hashes): cached blocks go plain free."""

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if block in self.map:
                self.evictable_lru[block] = None
            else:
                self.free.append(block)


def test_a_parked_block_that_loses_its_hash_is_told_so_not_a_reclaim_rule() -> None:
    report, _ = failing_report("prefix-cache", _ParksWithoutHash, 3)
    assert "yours put block 0 on the evictable list but cleared its hash" in report.hint, (
        report.hint
    )
    assert "when a cached block is reclaimed" not in report.hint, report.hint
    report, _ = failing_report("prefix-cache", _ReleasesCachedToFree, 3)
    assert "on the evictable list but" not in report.hint, report.hint


def test_a_parked_block_that_loses_its_tokens_is_told_so_not_the_evictable_rule() -> None:
    report, _ = failing_report("prefix-cache", _ParksWithoutTokens, 3)
    assert "but cleared the tokens it stored (tokens[1] was (3, 4)" in report.hint, report.hint
    assert "goes on the evictable LRU" not in report.hint, report.hint
    report, _ = failing_report("prefix-cache", _ParksAtTheFront, 3)
    assert "cleared the tokens" not in report.hint, report.hint


class _LastFullBlockSkipped(P2):  # type: ignore[misc]
    """Registers new blocks only while i < len(chain) - 1: the last full block never."""

    def allocate(self, seq: int, token_ids: Any) -> int:
        if seq in self.tables:
            raise SequenceExists(f"{seq}")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks("no room")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain) - 1:
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class _FirstNewBlockSkipped(_LastFullBlockSkipped):
    """Look-alike: registers every full new block but the first one taken."""

    def allocate(self, seq: int, token_ids: Any) -> int:
        register = self._register
        skipped: list[int] = []

        def once(block: int, h: int, block_tokens: Any) -> None:
            if not skipped:
                skipped.append(block)
                return
            register(block, h, block_tokens)

        self._register = once  # type: ignore[method-assign]
        try:
            return super(_LastFullBlockSkipped, self).allocate(seq, token_ids)  # type: ignore[no-any-return]
        finally:
            del self._register


def test_a_prompt_block_left_unhashed_is_named_and_the_last_full_block_only_when_it_is() -> None:
    report, _ = failing_report("prefix-cache", _LastFullBlockSkipped, 2)
    assert "without a hash, where the reference hashes it" in report.hint, report.hint
    assert "the prompt's last full block" in report.hint, report.hint
    report, _ = failing_report("prefix-cache", _FirstNewBlockSkipped, 2)
    assert "the prompt's last full block" not in report.hint, report.hint


class _DecodeParentIsItself(P2):  # type: ignore[misc]
    """Names a filled block after table[-1], the block itself (no hash yet), not table[-2]."""

    def append_slot(self, seq: int, token_id: int) -> Any:
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[self.tables[seq][-1]] or 0
            self._register(slot.block, hash((parent, block_tokens)), block_tokens)
        return slot


def test_a_filled_block_hashed_off_the_chain_is_told_by_its_own_chain() -> None:
    report, _ = failing_report("prefix-cache", _DecodeParentIsItself, 2)
    assert "yours hashed block 2, which decoding filled with (5, 6), under another hash" in (
        report.hint
    ), report.hint
    never = next(m.impl for m in mistakes("prefix-cache") if m.name == "decode_never_cached")
    report, _ = failing_report("prefix-cache", never, 2)
    assert "under another hash" not in report.hint, report.hint


def test_a_freed_block_parked_in_front_is_told_by_a_recall_of_release() -> None:
    report, _ = failing_report("prefix-cache", _ParksAtTheFront, 3)
    assert "called on a copy as _release(1) and then _release(0), lists evictable() as" in (
        report.hint
    ), report.hint
    newest = next(m.impl for m in mistakes("prefix-cache") if m.name == "evicts_newest")
    report, _ = failing_report("prefix-cache", newest, 3)
    assert "called on a copy" not in report.hint, report.hint
