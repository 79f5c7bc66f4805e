"""``servelab progress``: a table of every grade cell, JSON for the instructor, protected cells."""

from __future__ import annotations

import io
import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from servelab.cli import main as cli_main
from servelab.progress import (
    FAILED,
    NOT_WRITTEN,
    PASSED,
    NotebookProgress,
    StepResult,
    _outcome,
    format_table,
    grade_steps,
    protect_grade_cells,
)

SETUP = "from servelab import checkpoint, grade\nSized = checkpoint('weight-cache', 1)"
# Step 2 unwritten: the learner's put still raises, as in a fresh exercise.
STUB = (
    "class Evicting(Sized):\n"
    "    def put(self, key, value, size):\n"
    "        raise NotImplementedError()"
)
# Step 1 wrong: used bytes never grow, so the budget check fails with a hint.
WRONG = (
    "class Forgetful(Sized):\n"
    "    def put(self, key, value, size):\n"
    "        self._entries[key] = (size, value)"
)


def _cell(source: str, cell_id: str) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    cell.id = cell_id
    return cell


def _learner(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    notebook = new_notebook(cells=list(cells))
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return notebook


def test_grade_steps_reads_the_step_of_each_grade_call() -> None:
    assert grade_steps('grade("weight-cache", C, step=3)') == [3]
    assert grade_steps("x = 1") == []
    assert grade_steps("grade(") == []  # a syntax error is no grade cell
    assert grade_steps('grade("t", C, step=True)') == []


def _error(ename: str, evalue: str) -> list[nbformat.NotebookNode]:
    return [new_output("error", ename=ename, evalue=evalue, traceback=[])]


def test_outcomes_are_passed_failed_with_hint_or_not_written() -> None:
    assert _outcome(1, []) == StepResult(1, PASSED)
    assert _outcome(2, _error("NotImplementedError", "")) == StepResult(2, NOT_WRITTEN)
    report = "t · step 3\n  ✗ pinned\n    hint: pin counts, not a flag\n    hint: second"
    assert _outcome(3, _error("GradeFailure", report)) == StepResult(
        3, FAILED, "pin counts, not a flag"
    )
    assert _outcome(4, _error("GradeFailure", "step 4: `pin` is not written yet")).status == (
        NOT_WRITTEN
    )
    assert _outcome(5, _error("NameError", "name 'C' is not defined")) == StepResult(
        5, FAILED, "NameError: name 'C' is not defined"
    )


def test_table_has_a_row_per_notebook_and_a_column_per_step() -> None:
    results = [
        NotebookProgress("01_a", [StepResult(1, PASSED), StepResult(2, FAILED, "evict in a loop")]),
        NotebookProgress("02_b", [StepResult(1, NOT_WRITTEN)]),
    ]
    lines = format_table(results).splitlines()
    assert lines[0].split() == ["notebook", "step", "1", "step", "2"]
    assert lines[2].split() == ["01_a", "passed", "failed", "[1]"]
    assert lines[3].split() == ["02_b", "not", "written"]
    assert "1 of 3 steps passed" in lines
    assert lines[-1] == "[1] 01_a step 2: evict in a loop"


def test_protect_overwrites_grade_cells_by_id_and_reports_deleted_ones() -> None:
    solution = _learner(
        _cell("x = 1", "a"),
        _cell('grade("weight-cache", C, step=3)', "g3"),
        _cell('grade("weight-cache", C, step=4)', "g4"),
    )
    learner = _learner(_cell("x = 2", "a"), _cell('grade("weight-cache", C, step=1)', "g3"))
    assert protect_grade_cells(learner, solution) == [4]
    assert learner.cells[0].source == "x = 2"  # the learner's own work is untouched
    assert learner.cells[1].source.endswith('grade("weight-cache", C, step=3)')
    assert "from servelab.grading import grade" in learner.cells[1].source


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path / "hypothesis"))
    # the kernel runs in the notebook's folder: import this checkout's package from there too
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent / "src"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "reference").mkdir()
    return tmp_path


def test_progress_runs_notebooks_and_reports(workspace: Path) -> None:
    """One kernel run: a passing step, an unwritten one, and a wrong one with its hint."""
    learner = _learner(
        _cell(SETUP, "setup"),
        _cell('grade("weight-cache", Sized, step=1)', "g1"),
        _cell(STUB, "s2"),
        _cell('grade("weight-cache", Evicting, step=2)', "g2"),
        _cell(WRONG, "w"),
        _cell('grade("weight-cache", Forgetful, step=1)', "g1b"),
    )
    nbformat.write(learner, workspace / "mine" / "01_demo.ipynb")
    out, err = io.StringIO(), io.StringIO()
    json_path = workspace / "progress.json"
    from servelab.progress import main

    code = main([workspace / "mine"], json_path=json_path, out=out, err=err, timeout=120)
    assert code == 1
    record = json.loads(json_path.read_text())
    (notebook,) = record["notebooks"]
    statuses = [(s["step"], s["status"]) for s in notebook["steps"]]
    assert statuses == [(1, PASSED), (1, FAILED), (2, NOT_WRITTEN)], notebook
    assert notebook["steps"][1]["hint"]  # the grader's hint, not empty
    assert record["passed"] is False
    assert "01_demo" in out.getvalue() and "[1] 01_demo step 1:" in out.getvalue()
    assert "cells" in err.getvalue()  # the progress bar


def test_protected_grading_restores_a_weakened_grade_cell(workspace: Path) -> None:
    """The learner's class has no eviction loop; they lowered the step-2 cell to step 1."""
    reference = _learner(_cell(SETUP, "setup"), _cell('grade("weight-cache", Sized, step=2)', "g2"))
    weakened = _learner(_cell(SETUP, "setup"), _cell('grade("weight-cache", Sized, step=1)', "g2"))
    nbformat.write(reference, workspace / "reference" / "01_demo.ipynb")
    nbformat.write(weakened, workspace / "mine" / "01_demo.ipynb")
    mine = str(workspace / "mine")
    assert cli_main(["progress", mine, "--timeout", "120"]) == 0  # fooled: step 1 passes
    report = workspace / "protected.json"
    protect = ["--protect", str(workspace / "reference"), "--json", str(report)]
    assert cli_main(["progress", mine, *protect]) == 1
    (step,) = json.loads(report.read_text())["notebooks"][0]["steps"]
    assert (step["step"], step["status"]) == (2, FAILED) and step["hint"]


def test_bad_paths_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["progress", str(tmp_path / "nothing.txt")]) == 2
    assert cli_main(["progress", str(tmp_path)]) == 2
    assert "no notebooks" in capsys.readouterr().err


def test_the_learner_ci_template_runs_the_same_command() -> None:
    template = Path(__file__).resolve().parent.parent / "docs" / "learner-ci.yml"
    text = template.read_text(encoding="utf-8")
    assert "servelab progress exercises --protect solutions --json progress.json" in text
    assert "pip install -e '.[lab]'" in text  # the light install, as make lab
