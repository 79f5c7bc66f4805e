"""Two sentences a report earns by replay or by the learner's own source: a method with no
``return`` of a value, found first, before a TypeError about a None; and a ``fits`` a block
early only while something runs. Each graded end to end on a real slip, with a look-alike
where the sentence must not appear."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.no_return import returns_no_value
from servelab.kv.budget import Chunk

Budget = checkpoint("token-budget", 1)
Admitting = checkpoint("scheduler", 1)
NO_RETURN = "has no `return` with a value, so every call returns None"
WHILE_RUNNING = "and only while something runs"


class ForgetsTheReturn(Budget):
    """schedule_running never returns the budget left."""

    def schedule_running(self, out: Any, budget: int) -> Any:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n


class ReturnsOnlyWhileRunning(Budget):
    """Returns the budget only while something runs: None from an empty running list."""

    def schedule_running(self, out: Any, budget: int) -> Any:
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget if self.running else None


class StrictWhileRunning(Admitting):
    """Keeps a block more than the watermark once something runs."""

    def fits(self, n_tokens: int) -> bool:
        keep = self.watermark + (1 if self.running else 0)
        return bool(self.bm.num_free - self.blocks_needed(n_tokens) >= keep)


class StrictAlways(Admitting):
    """Wants more than the watermark left, running or not."""

    def fits(self, n_tokens: int) -> bool:
        return bool(self.bm.num_free - self.blocks_needed(n_tokens) > self.watermark)


def _hint(topic: str, impl: type, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(topic, impl, step, quiet=True)
    hint = str(failed.value).split("hint: ", 1)[1]
    return hint


def test_a_method_with_no_return_is_named_with_the_line_that_raised() -> None:
    hint = _hint("token-budget", ForgetsTheReturn, 1)
    assert hint.startswith(f"start at your `schedule_running`: it {NO_RETURN}")
    assert "the reference returns 10" in hint
    assert "`if n > budget:` in `admit` raised TypeError" in hint
    assert "forgot to return" not in hint  # the type's usual cause is not guessed besides


def test_a_method_that_returns_a_value_on_some_path_is_not_said_to_have_none() -> None:
    hint = _hint("token-budget", ReturnsOnlyWhileRunning, 1)
    assert "`schedule_running`" in hint and "NoneType" in hint  # the same symptom
    assert NO_RETURN not in hint


def test_returns_no_value_reads_the_source_nested_functions_aside() -> None:
    def outer(x: int) -> None:
        def inner() -> int:
            return x

        print(inner(), [lambda: 1])

    def bare(x: int) -> None:
        if x:
            return
        print(x)

    def valued(x: int) -> int:
        return x

    assert returns_no_value(outer) is True
    assert returns_no_value(bare) is True
    assert returns_no_value(valued) is False
    assert returns_no_value(len) is None  # no source to read


def test_a_fits_a_block_early_only_while_running_says_so() -> None:
    hint = _hint("scheduler", StrictWhileRunning, 1)
    assert "num_free - needed == watermark, one block early" in hint
    assert WHILE_RUNNING in hint
    assert "with running emptied and the same 3 blocks free, yours admits 4 tokens" in hint


def test_a_fits_a_block_early_always_is_not_said_to_depend_on_running() -> None:
    hint = _hint("scheduler", StrictAlways, 1)
    assert "one block early" in hint
    assert WHILE_RUNNING not in hint
