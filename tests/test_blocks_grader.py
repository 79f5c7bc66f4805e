"""The block-manager grader passes the references and fails every known-buggy implementation."""

from __future__ import annotations

import importlib
import io
import re
from pathlib import Path

import pytest

from servelab.grading.core import GradeFailure, grade
from servelab.kv.blocks import BlockManager

BUGGY = Path(__file__).parent / "buggy" / "block_manager"
CASES = sorted(p.stem for p in BUGGY.glob("*.py") if p.stem not in {"learner", "__init__"})


def _load(stem: str) -> type:
    module = importlib.import_module(f"buggy.block_manager.{stem}")
    return module.BlockManager  # type: ignore[no-any-return]


def _expected_word(stem: str) -> str:
    text = (BUGGY / f"{stem}.py").read_text()
    match = re.search(r"# expected hint word: (.+)", text)
    assert match, f"{stem}.py must name the word its hint should contain"
    return match.group(1).strip()


@pytest.mark.parametrize("impl", [BlockManager, "learner"], ids=["reference", "learner"])
def test_correct_implementations_pass_every_step(impl: object) -> None:
    cls = _load(impl) if isinstance(impl, str) else impl
    out = io.StringIO()
    for step in (1, 2, 3, 4):
        report = grade("block-manager", cls, step=step, out=out)
        assert report.passed
    assert out.getvalue().count("PASSED") == 4


def test_every_mistake_has_a_buggy_implementation() -> None:
    assert len(CASES) >= 5


@pytest.mark.parametrize("stem", CASES)
def test_buggy_implementation_fails_with_its_hint(stem: str) -> None:
    with pytest.raises(GradeFailure) as caught:
        grade("block-manager", _load(stem), out=io.StringIO())
    report = caught.value.report
    assert not report.passed
    assert _expected_word(stem) in report.hint, report.text
    assert report.code.startswith("bm = BlockManager("), report.text


def test_unfinished_implementation_reports_not_implemented() -> None:
    class Unfinished(BlockManager):
        def append_slot(self, seq: int):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    grade("block-manager", Unfinished, step=1, out=io.StringIO())
    with pytest.raises(NotImplementedError):
        grade("block-manager", Unfinished, step=2, out=io.StringIO())
