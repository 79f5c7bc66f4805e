"""What execute handed the engine, said against what the step asked for: copies passed
(destination, source) are named as reversed, and missing rows are named by the decode or prefill
they belong to, never read as an index or a typo of the learner's."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")

from tests.unlisted import engine as slips

from servelab.grading import GradeFailure, grade


def _report(impl: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("engine", impl, step=1, quiet=True)
    return str(failed.value)


def test_copies_passed_destination_first_are_named_reversed() -> None:
    report = _report(slips.CopiesReversed)
    assert (
        "ExecuteError: execute copied [(2, 1), (3, 1)]: each pair is a copy this step's "
        "append_slot asked for, reversed; copy takes (source, destination) pairs, "
        "(d.slot.cow_src, d.slot.block), here [(1, 2), (1, 3)]"
    ) in report
    assert "index past the end" not in report


def test_a_copy_onto_itself_is_not_called_reversed() -> None:
    report = _report(slips.CopiesOntoItself)
    assert "reversed" not in report and "index past the end" not in report
    assert (
        "execute copied [(1, 1), (1, 1)]: a destination block appears twice in [(1, 1), (1, 1)]; "
        "this step's append_slot asked for the copies (d.slot.cow_src, d.slot.block) "
        "[(1, 2), (1, 3)]"
    ) in report


def test_a_missing_prefill_row_is_named_by_its_prefill() -> None:
    report = _report(slips.FirstPrefillOnly)
    assert "this step decodes [] and prefills [0, 1]" in report
    assert "no row for the prefill of sequence(s) [1]" in report
    assert "no row for the decode" not in report


def test_rows_that_lost_a_decode_name_the_decode() -> None:
    report = _report(slips.RowsReplaced)
    assert "this step decodes [0] and prefills [1]" in report
    assert "no row for the decode of sequence(s) [0]" in report
    assert "your code raised" not in report  # the engine raised it, about what execute returned
