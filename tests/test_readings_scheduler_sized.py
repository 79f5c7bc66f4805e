"""An add() that refuses a request with generated tokens, which the same request with none
generated gets past (on a copy), is told that what a request may need does not grow with what it
generated; "counting them twice" is said only where num_tokens + max_new_tokens predicts yours."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.scheduler_contract import RequestTooLarge

S = "scheduler"
Admitting = checkpoint(S, 1)
GROWS = "yet takes the same request with none generated (on a copy)"
TWICE = "counting them twice"


def _hint(impl: Any) -> str:
    report, _ = failing_report(S, impl, 1)
    return str(report.hint)


def _refuse_over(sched: Any, seq: Any, need: int) -> None:
    if need > sched.bm.num_blocks - sched.watermark:
        raise RequestTooLarge(f"sequence {seq.seq_id} needs {need} blocks")
    sched.waiting.append(seq)


class _TokensBesideMaxNew(Admitting):  # type: ignore[misc]
    """Sizes a request at every token it holds plus all it may still generate."""

    def add(self, seq: Any) -> None:
        _refuse_over(self, seq, self.blocks_needed(len(seq.token_ids) + seq.max_new_tokens))


class _GeneratedAsBlocks(Admitting):  # type: ignore[misc]
    """Adds the generated tokens' count to a size in blocks: it grows, but not as num_tokens +
    max_new_tokens would."""

    def add(self, seq: Any) -> None:
        need = self.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        _refuse_over(self, seq, need + len(seq.token_ids) - seq.prompt_len)


def test_generated_tokens_counted_beside_max_new_are_named() -> None:
    said = _hint(_TokensBesideMaxNew)
    assert GROWS in said and TWICE in said


def test_a_size_that_grows_otherwise_is_not_said_to_count_them_twice() -> None:
    said = _hint(_GeneratedAsBlocks)
    assert GROWS in said and TWICE not in said
