"""A kernel mistake nobody listed is named when the learner's numbers equal the oracle's with one
rule changed (:mod:`servelab.grading.paged_kernel_variants`) on the failing case and on every
fixed case of the step; a look-alike that breaks the same rule another way is only placed.

Each slip is the notebook's own function with one line changed, defined as a notebook cell is.
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any

import pytest

pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from servelab.grading import GradeFailure, grade  # noqa: E402
from servelab.grading.mistakes import correct_impl  # noqa: E402
from servelab.grading.paged_kernel_variants import VARIANTS  # noqa: E402
from servelab.testing.paged_kernel import helper, rebuilt  # noqa: E402

TOPIC = "paged-kernel"
CORRECT = correct_impl(TOPIC)
LIKE = {v.name: v.like for v in VARIANTS}
_cells = iter(range(10**6))


def _slip(name: str, old: str, new: str) -> Any:
    """The checkpoint's ``name`` with ``old`` replaced by ``new``, defined as a cell would."""
    source = inspect.getsource(helper(CORRECT, name).fn)
    assert old in source, old
    source = source.replace(old, new)
    filename = f"<paged-kernel-variant-{next(_cells)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {
        "triton": triton,
        "tl": tl,
        "load_block": helper(CORRECT, "load_block"),
        "attend": helper(CORRECT, "attend"),
    }
    exec(compile(source, filename, "exec"), scope)
    return scope[name]


def _hint(fn: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, fn, step=step, quiet=True)
    return str(failed.value.report.hint)


SCORES = "s = tl.sum(k * q[None, :], axis=1) * scale"
LOOP = "for j in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):"
ROW = "tables + seq * stride_tb"


def test_scores_never_scaled_are_named() -> None:
    attend = _slip("attend", SCORES, "s = tl.sum(k * q[None, :], axis=1)")
    assert _hint(attend, 2).endswith(f"gives exactly the numbers of one that {LIKE['unscaled']}")


def test_scores_scaled_by_another_factor_are_only_placed() -> None:
    attend = _slip("attend", SCORES, "s = tl.sum(k * q[None, :], axis=1) * scale * 0.5")
    hint = _hint(attend, 2)
    assert hint.startswith("the values first differ in your attend (step 2)")
    assert "exactly the numbers" not in hint


def test_a_loop_over_whole_blocks_is_named() -> None:
    attend = _slip("attend", LOOP, "for j in range(0, seq_len // BLOCK_SIZE):")
    assert _hint(attend, 2).endswith(LIKE["whole blocks only"])


def test_a_loop_that_skips_the_first_block_is_only_placed() -> None:
    attend = _slip("attend", LOOP, "for j in range(1, tl.cdiv(seq_len, BLOCK_SIZE)):")
    assert "exactly the numbers" not in _hint(attend, 2)


def test_a_table_row_read_at_tables_plus_seq_is_named_in_the_whole_kernel() -> None:
    kernel = _slip("paged_decode_kernel", ROW, "tables + seq")
    assert _hint(kernel, 3).endswith(LIKE["table row unstrided"])
    assert _hint(rebuilt(CORRECT, paged_decode_kernel=kernel), 3).endswith(
        LIKE["table row unstrided"]
    )


def test_a_table_row_read_at_another_offset_is_only_placed() -> None:
    kernel = _slip("paged_decode_kernel", ROW, "tables + seq * stride_tb + 1")
    assert "exactly the numbers" not in _hint(kernel, 3)
