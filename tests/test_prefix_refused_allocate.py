"""A refused allocate keeps nothing of the sequence it refused: an allocate that records the
prompt's tokens before its room test fails step 2 with that said; the notebook's own class,
which tests the room first, passes the same check."""

from __future__ import annotations

import contextlib
import io

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks, SequenceExists

Sharing = checkpoint("prefix-cache", 2)


class _TokensBeforeTheRoom(Sharing):  # type: ignore[misc]
    """Records the sequence's tokens before the room test."""

    def allocate(self, seq: int, token_ids: list[int]) -> int:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        self.seq_tokens[seq] = tokens
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        return len(hits) * self.block_size


def test_tokens_recorded_before_the_room_test_fail_the_refused_allocate_check() -> None:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(GradeFailure) as failed:
        grade("prefix-cache", _TokensBeforeTheRoom, 2)
    report = str(failed.value)
    assert "✗ step 2 · a refused allocate keeps nothing" in report
    assert "seq_tokens keeps tokens for sequences [0, 1]" in report
    assert "test the room before recording the sequence's tokens" in report


def test_the_notebook_class_passes_the_refused_allocate_check() -> None:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        grade("prefix-cache", Sharing, 2)
        grade("prefix-cache", checkpoint("prefix-cache", 3), 3)
    assert "✓ step 2 · a refused allocate keeps nothing" in out.getvalue()
