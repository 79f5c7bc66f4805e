"""Checkpoints: each one passes its own step, and a learner can go on from it.

A checkpoint is the notebook's solution as of step n. Handed to a learner, it must pass the
step-n grade, and the learner's next (still unwritten) step built on it must be reported as
not written yet, never as a wrong answer.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest

from servelab import GradeFailure, checkpoint, grade
from servelab.checkpoints import checkpoint_topics

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "servelab_tools_notebooks", ROOT / "tools/notebooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _module(topic: str) -> ModuleType:
    return importlib.import_module(f"servelab.checkpoints.{topic.replace('-', '_')}")


CASES = [(t, n) for t in checkpoint_topics() for n in sorted(_module(t).STEPS)]


def test_checkpoints_and_stored_outputs_are_in_sync_with_solutions() -> None:
    tool = _tool()
    problems = tool.check_checkpoints() + tool.untidy([tool.SOLUTIONS_DIR, tool.LECTURES_DIR])
    assert not problems, "run `make exercises`:\n" + "\n".join(
        f"  {p.path.relative_to(ROOT)}: {p.reason}" for p in problems
    )


def test_every_graded_notebook_has_checkpoints() -> None:
    graded = {t for t, _ in CASES}
    assert graded == set(checkpoint_topics())
    assert [n for t, n in CASES if t == "weight-cache"] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(("topic", "step"), CASES, ids=[f"{t}-{n}" for t, n in CASES])
def test_checkpoint_passes_its_own_step(topic: str, step: int) -> None:
    report = grade(topic, checkpoint(topic, step), step=step, quiet=True)
    assert report.passed


def _exercise_cell_defining(topic: str, names: set[str]) -> str:
    """The learner's (unsolved) cell that defines one of ``names``, from exercises/."""
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        sources = [c.source for c in notebook.cells if c.cell_type == "code"]
        if not any(f'grade("{topic}"' in s for s in sources):
            continue
        for source in sources:
            try:
                tree = ast.parse(source)
            except SyntaxError:  # an IPython magic (the Colab setup cell)
                continue
            defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
            if defined & names:
                return source
    raise AssertionError(f"no exercise cell of {topic} defines any of {names}")


NEXT = [(t, n) for t, n in CASES if n + 1 in _module(t).STEPS]


@pytest.mark.parametrize(("topic", "step"), NEXT, ids=[f"{t}-{n}" for t, n in NEXT])
def test_the_step_after_a_checkpoint_is_reported_as_not_written(topic: str, step: int) -> None:
    module = _module(topic)
    graded_next = ast.parse(_grade_argument(module, step + 1), mode="eval")
    names = {n.id for n in ast.walk(graded_next) if isinstance(n, ast.Name)}
    namespace: dict[str, Any] = dict(vars(module))  # the checkpoint: steps 1..n, solved
    exec(_exercise_cell_defining(topic, names), namespace)  # step n+1 as the learner gets it
    learner = eval(compile(graded_next, "<grade argument>", "eval"), namespace)
    try:
        grade(topic, learner, step=step + 1, quiet=True)
    except NotImplementedError:
        pass  # the unwritten method raised straight through the grader
    except GradeFailure as failure:
        assert "not written yet" in str(failure), str(failure)
    else:
        pytest.fail(f"{topic} step {step + 1} passed with its methods still unwritten")


def _grade_argument(module: ModuleType, step: int) -> str:
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    for line in source.splitlines():
        if line.strip().startswith(f"{step}: lambda: "):
            return line.strip().removeprefix(f"{step}: lambda: ").rstrip(",")
    raise AssertionError(f"no step {step} in {module.__name__}")


@pytest.mark.parametrize(("topic", "step"), [("weight-cache", 9), ("weight-cache", True)])
def test_unknown_step_is_a_value_error(topic: str, step: Any) -> None:
    with pytest.raises(ValueError, match="steps"):
        checkpoint(topic, step)


def test_unknown_topic_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="weight-cache"):
        checkpoint("kv-cache", 1)
