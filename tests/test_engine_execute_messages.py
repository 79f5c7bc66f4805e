"""What execute handed the engine, said against what the step asked for: copies passed
(destination, source) are named as reversed, and missing rows are named by the decode or prefill
they belong to, never read as an index or a typo of the learner's."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")

from servelab import checkpoint
from servelab.grading import GradeFailure, grade

Engine: Any = checkpoint("engine", 1)


def _cow(out):
    return [(d.slot.cow_src, d.slot.block) for d in out.decodes if d.slot.cow_src is not None]


class CopiesReversed(Engine):
    """Passes each copy as (block, cow_src): destination first."""

    def execute(self, out):
        self.copy([(dst, src) for src, dst in _cow(out)])
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows += self.prefill(p)
        return rows


class CopiesOntoItself(Engine):
    """Copies each shared block onto itself: (cow_src, cow_src)."""

    def execute(self, out):
        self.copy([(src, src) for src, _ in _cow(out)])
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows += self.prefill(p)
        return rows


class FirstPrefillOnly(Engine):
    """Runs only the first prefill of a step."""

    def execute(self, out):
        self.copy(_cow(out))
        rows = self.decode(out.decodes)
        if out.prefills:
            rows += self.prefill(out.prefills[0])
        return rows


class RowsReplaced(Engine):
    """Each prefill's rows replace the rows so far instead of adding to them."""

    def execute(self, out):
        self.copy(_cow(out))
        rows = self.decode(out.decodes)
        for p in out.prefills:
            rows = self.prefill(p)
        return rows


def _report(impl: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("engine", impl, step=1, quiet=True)
    return str(failed.value)


def test_copies_passed_destination_first_are_named_reversed() -> None:
    report = _report(CopiesReversed)
    assert (
        "ExecuteError: execute copied [(2, 1), (3, 1)]: each pair is a copy this step's "
        "append_slot asked for, reversed; copy takes (source, destination) pairs, "
        "(d.slot.cow_src, d.slot.block), here [(1, 2), (1, 3)]"
    ) in report
    assert "index past the end" not in report


def test_a_copy_onto_itself_is_not_called_reversed() -> None:
    report = _report(CopiesOntoItself)
    assert "reversed" not in report and "index past the end" not in report
    assert (
        "execute copied [(1, 1), (1, 1)]: a destination block appears twice in [(1, 1), (1, 1)]; "
        "this step's append_slot asked for the copies (d.slot.cow_src, d.slot.block) "
        "[(1, 2), (1, 3)]"
    ) in report


def test_a_missing_prefill_row_is_named_by_its_prefill() -> None:
    report = _report(FirstPrefillOnly)
    assert "this step decodes [] and prefills [0, 1]" in report
    assert "no row for the prefill of sequence(s) [1]" in report
    assert "no row for the decode" not in report


def test_rows_that_lost_a_decode_name_the_decode() -> None:
    report = _report(RowsReplaced)
    assert "this step decodes [0] and prefills [1]" in report
    assert "no row for the decode of sequence(s) [0]" in report
    assert "your code raised" not in report  # the engine raised it, about what execute returned


def test_rows_replaced_by_the_last_helper_call_say_so() -> None:
    report = _report(RowsReplaced)
    assert (
        "The list execute returned is the one its last helper call, prefill, returned "
        "(rows for [1]), unchanged; the rows handed earlier in this step (decode for "
        "sequence(s) [0]) are not in it"
    ) in report


def test_rows_of_a_prefill_left_out_are_not_said_replaced() -> None:
    report = _report(FirstPrefillOnly)
    assert "last helper call" not in report
