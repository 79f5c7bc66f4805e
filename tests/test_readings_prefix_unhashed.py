"""A prompt block an allocate left without a hash: that the hashing goes wrong only after a
prefix hit (and the question of the chain entry's index) said only where a replay with no hit
hashes every full block; "the last full one too" only where a replay shows the last full block
is the one skipped."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks, SequenceExists

P2 = checkpoint("prefix-cache", 2)
AFTER_HIT = "the hashing goes wrong only after a prefix hit (1 block(s) here)"
INDEXED = "is the chain entry of a new block indexed from the prompt's start"
LAST = "the last full one too"


def _hint(impl: Any) -> str:
    report, _ = failing_report("prefix-cache", impl, 2)
    return str(report.hint)


class _NewCountedFromZero(P2):  # type: ignore[misc]
    """Gives the j-th new block the chain's entry j, counting from the first new block."""

    def allocate(self, seq: int, token_ids: Any) -> int:
        if seq in self.tables:
            raise SequenceExists(str(seq))
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks("no room")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for j in range(need):
            block = self._alloc()
            table.append(block)
            if len(hits) + j < len(chain):
                self._register(block, *chain[j])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class _NoRegisterAfterHit(P2):  # type: ignore[misc]
    """Look-alike: registers no new block once the prompt had a prefix hit."""

    def allocate(self, seq: int, token_ids: Any) -> int:
        if seq in self.tables:
            raise SequenceExists(str(seq))
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
            if i < len(chain) and not hits:
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class _LastFullSkipped(P2):  # type: ignore[misc]
    """Look-alike: never registers the prompt's last full block."""

    def allocate(self, seq: int, token_ids: Any) -> int:
        if seq in self.tables:
            raise SequenceExists(str(seq))
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


def test_new_blocks_named_from_the_first_new_one_are_told_the_hit_and_asked_the_index() -> None:
    hint = _hint(_NewCountedFromZero)
    assert "yours left block 1 (position 1 of sequence 1's table" in hint, hint
    assert AFTER_HIT in hint, hint
    assert "yours registered block 1 under the chain's entry 0, not 1" in hint, hint
    assert INDEXED in hint, hint
    assert LAST not in hint, hint


def test_no_registration_after_a_hit_is_told_the_hit_but_not_asked_the_index() -> None:
    hint = _hint(_NoRegisterAfterHit)
    assert AFTER_HIT in hint, hint
    assert INDEXED not in hint and LAST not in hint, hint


def test_a_skipped_last_full_block_keeps_the_last_full_one_and_not_the_hit() -> None:
    hint = _hint(_LastFullSkipped)
    assert LAST in hint and "with one more full block the new last one instead" in hint, hint
    assert "after a prefix hit" not in hint and INDEXED not in hint, hint
