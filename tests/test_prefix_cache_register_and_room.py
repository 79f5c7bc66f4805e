"""A _register that skips a block because another cached block holds the same tokens, under
another prefix, is told so, proven on a copy where those stored tokens differ; a _register
that skips blocks for another reason gets no such sentence. An allocate whose all-or-nothing
test leaves the partial last block out is told so, proven on copies with the prompt padded to a
whole block and cut to its full blocks; one whose test is one block short everywhere is not."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks, SequenceExists

Lookup = checkpoint("prefix-cache", 1)
SAID = "yours skips a block because its tokens are cached, whatever comes before them"


def _hint(impl: Any) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("prefix-cache", impl, 1)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _SkipsStoredTokens(Lookup):  # type: ignore[misc]
    """Registers a block only when no block stores the same tokens yet."""

    def _register(self, block: int, h: int, block_tokens: tuple[int, ...]) -> None:
        if any(t == block_tokens for t in self.tokens if t is not None):
            return
        self.map[h] = block
        self.hash[block] = h
        self.tokens[block] = block_tokens


class _FirstBlockOnly(Lookup):  # type: ignore[misc]
    """Registers only while the map is empty."""

    def _register(self, block: int, h: int, block_tokens: tuple[int, ...]) -> None:
        if self.map:
            return
        self.map[h] = block
        self.hash[block] = h
        self.tokens[block] = block_tokens


def test_a_block_skipped_for_tokens_cached_under_another_prefix_is_named() -> None:
    hint = _hint(_SkipsStoredTokens)
    assert SAID in hint
    assert "already holds under another hash" in hint


def test_a_block_skipped_for_another_reason_is_not_put_on_its_tokens() -> None:
    assert SAID not in _hint(_FirstBlockOnly)


Sharing = checkpoint("prefix-cache", 2)
ROOM = "your all-or-nothing test leaves the partial last block out of the blocks it needs"


def _hint2(impl: Any) -> str:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("prefix-cache", impl, 2)
    return next(line for line in str(failed.value).splitlines() if "hint:" in line)


class _RoomInFloorBlocks(Sharing):  # type: ignore[misc]
    """Tests the room with the prompt's full blocks only (len // block_size), then takes every
    block the prompt fills."""

    def allocate(self, seq: int, token_ids: Any) -> int:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        chain = self._chain(tokens)
        if len(tokens) // self.block_size - len(hits) > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} does not fit")
        for block in hits:
            self._claim(block)
        table = list(hits)
        for i in range(len(hits), -(-len(tokens) // self.block_size)):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


class _RoomOneShort(_RoomInFloorBlocks):  # type: ignore[misc]
    """Tests the room with one block fewer than the prompt fills, partial last block or not."""

    def allocate(self, seq: int, token_ids: Any) -> int:
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        if -(-len(tokens) // self.block_size) - len(hits) - 1 > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} does not fit")
        self._room = lambda hits: 1 << 30  # the test above is the only one
        try:
            return super().allocate(seq, token_ids)
        finally:
            del self._room


def test_a_room_test_without_the_partial_block_is_named() -> None:
    hint = _hint2(_RoomInFloorBlocks)
    assert ROOM in hint
    assert "the last one partial" in hint


def test_a_room_test_one_block_short_everywhere_is_not_put_on_the_partial_block() -> None:
    assert ROOM not in _hint2(_RoomOneShort)
