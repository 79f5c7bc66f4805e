"""A schedule_running that gives every running request one token, a decode's share, is told
which request it cut while more of its tokens were to compute and the budget had room; one that
cuts chunks otherwise (not one token each) is not told that."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.budget import Chunk

ONE = "one token is a decode's share"


def _hint(impl: Any) -> str:
    return str(failing_report("token-budget", impl, 2)[0].hint)


class _OneTokenEach(checkpoint("token-budget", 2)):  # type: ignore[misc]
    """Schedules each running request one token, as if every one of them were decoding."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            slots = self.extend(seq, start, 1)
            out.scheduled.append(Chunk(seq, start, 1, slots, start + 1 == seq.num_tokens))
            self.computed[seq.seq_id] = start + 1
            budget -= 1
        return budget


class _HalfTheBudget(checkpoint("token-budget", 2)):  # type: ignore[misc]
    """Gives a running request at most half the budget left (at least one token)."""

    def schedule_running(self, out: Any, budget: int) -> int:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, max(budget // 2, 1))
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


def test_one_token_each_is_named_with_the_request_it_cut() -> None:
    said = _hint(_OneTokenEach)
    assert "yours scheduled request" in said and ONE in said


def test_chunks_cut_otherwise_are_not_told_one_token_each() -> None:
    assert ONE not in _hint(_HalfTheBudget)
