"""``servelab progress``: a table of every grade cell, JSON for the instructor, protected cells."""

from __future__ import annotations

import io
import json
import subprocess
import sys
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
    grade_calls,
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


def _saved_pass(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The cell as a saved notebook shows it after an earlier run that passed."""
    cell.execution_count = 7
    cell.outputs = [new_output("stream", name="stdout", text="weight-cache · step 1\nPASSED\n")]
    return cell


def _learner(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    notebook = new_notebook(cells=list(cells))
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return notebook


def test_grade_calls_reads_the_topic_and_step_of_each_grade_call() -> None:
    assert grade_calls('grade("weight-cache", C, step=3)') == [("weight-cache", 3)]
    assert grade_calls('grade(topic="scheduler", impl=C, step=2)') == [("scheduler", 2)]
    assert grade_calls("grade(name, C, step=1)") == [("", 1)]
    assert grade_calls("x = 1") == []
    assert grade_calls("grade(") == []  # a syntax error is no grade cell
    assert grade_calls('grade("t", C, step=True)') == []


def _error(ename: str, evalue: str) -> list[nbformat.NotebookNode]:
    return [new_output("error", ename=ename, evalue=evalue, traceback=[])]


def _stdout(text: str) -> list[nbformat.NotebookNode]:
    return [new_output("stream", name="stdout", text=text)]


def test_outcomes_are_passed_failed_with_hint_or_not_written() -> None:
    t = "weight-cache"
    assert _outcome(t, 1, _stdout("weight-cache · step 1\n  ✓ a check\nPASSED\n")) == (
        StepResult(t, 1, PASSED)
    )
    assert _outcome(t, 2, _error("NotImplementedError", "")) == StepResult(t, 2, NOT_WRITTEN)
    report = "t · step 3\n  ✗ pinned\n    hint: pin counts, not a flag\n    hint: second"
    assert _outcome(t, 3, _error("GradeFailure", report)) == StepResult(
        t, 3, FAILED, "pin counts, not a flag"
    )
    assert _outcome(t, 4, _error("GradeFailure", "step 4: `pin` is not written yet")).status == (
        NOT_WRITTEN
    )
    assert _outcome(t, 5, _error("NameError", "name 'C' is not defined")) == StepResult(
        t, 5, FAILED, "NameError: name 'C' is not defined"
    )


def test_a_grade_cell_that_printed_no_passed_has_not_passed() -> None:
    """No error output is not enough: the grader's last line must be there."""
    for outputs in ([], _stdout("weight-cache · step 1\n  ✓ a check\n")):
        result = _outcome("weight-cache", 1, outputs)
        assert (result.status, result.hint) == (
            FAILED,
            "the grade cell finished without printing PASSED",
        )


def test_table_has_a_row_per_grade_cell_by_topic_and_step() -> None:
    results = [
        NotebookProgress(
            "03_c",
            [
                StepResult("block-manager", 3, FAILED, "copy before writing"),
                StepResult("invariant-checker", 3, PASSED),
            ],
        ),
        NotebookProgress("02_b", [StepResult("eviction-policy", 1, NOT_WRITTEN)]),
        NotebookProgress("04_d", []),
    ]
    lines = format_table(results).splitlines()
    assert lines[0].split() == ["notebook", "topic", "step", "result"]
    assert [line.split() for line in lines[2:6]] == [
        ["03_c", "block-manager", "3", "failed", "[1]"],
        ["03_c", "invariant-checker", "3", "passed"],
        ["02_b", "eviction-policy", "1", "not", "written"],
        ["04_d", "-", "-", "no", "grade", "cells"],
    ]
    assert "1 of 3 steps passed" in lines
    assert lines[-1] == "[1] 03_c · block-manager step 3: copy before writing"


def test_protect_overwrites_grade_cells_by_id_and_reports_deleted_ones() -> None:
    solution = _learner(
        _cell("x = 1", "a"),
        _cell('grade("weight-cache", C, step=3)', "g3"),
        _cell('grade("weight-cache", C, step=4)', "g4"),
    )
    learner = _learner(_cell("x = 2", "a"), _cell('grade("weight-cache", C, step=1)', "g3"))
    assert protect_grade_cells(learner, solution) == [("weight-cache", 4)]
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
    statuses = [(s["topic"], s["step"], s["status"]) for s in notebook["steps"]]
    topic = "weight-cache"
    assert statuses == [(topic, 1, PASSED), (topic, 2, NOT_WRITTEN), (topic, 1, FAILED)], notebook
    assert notebook["steps"][2]["hint"]  # the grader's hint, not empty
    assert record["passed"] is False
    assert "[1] 01_demo · weight-cache step 1:" in out.getvalue()
    assert "cells" in err.getvalue()  # the progress bar


def test_two_topics_graded_at_the_same_step_both_show(workspace: Path) -> None:
    """Notebook 03 grades block-manager step 3 and invariant-checker step 3: both are rows."""
    learner = _learner(
        _cell(SETUP, "setup"),
        _cell(WRONG, "w"),
        _cell('grade("weight-cache", Forgetful, step=1)', "g1"),
        _cell("Counts = checkpoint('eviction-policy', 1)", "c"),
        _cell('grade("eviction-policy", Counts, step=1)', "e1"),
    )
    nbformat.write(learner, workspace / "mine" / "03_demo.ipynb")
    out = io.StringIO()
    from servelab.progress import main

    code = main([workspace / "mine"], out=out, err=io.StringIO(), timeout=120)
    rows = [line.split()[:4] for line in out.getvalue().splitlines()[2:4]]
    assert rows == [
        ["03_demo", "weight-cache", "1", "failed"],
        ["03_demo", "eviction-policy", "1", "passed"],
    ]
    assert "1 of 2 steps passed" in out.getvalue()
    assert "[1] 03_demo · weight-cache step 1: " in out.getvalue()  # the hint is kept
    assert code == 1  # the table shows a failure, and the exit code agrees


EXITING = (
    "import os\nclass Exiting(Sized):\n    def put(self, key, value, size):\n        os._exit(0)"
)
# One C call that never returns in the time given: the in-kernel hang guard cannot stop it.
HANGING = "class Hanging(Sized):\n    def put(self, key, value, size):\n        sum(range(10**12))"


def test_a_grade_cell_that_ends_the_kernel_has_not_passed(workspace: Path) -> None:
    """``os._exit(0)`` in the learner's put: the grade cell shows no error, and never finished.

    The later grade cell still carries the outputs of an earlier, passing run: they are not
    this run's and do not count.
    """
    learner = _learner(
        _cell(SETUP, "setup"),
        _cell(EXITING, "x"),
        _cell('grade("weight-cache", Exiting, step=1)', "gx"),
        _cell(WRONG, "w"),
        _saved_pass(_cell('grade("weight-cache", Forgetful, step=1)', "gw")),
    )
    nbformat.write(learner, workspace / "mine" / "01_demo.ipynb")
    report = workspace / "progress.json"
    mine = str(workspace / "mine")
    assert cli_main(["progress", mine, "--timeout", "120", "--json", str(report)]) == 1
    steps = json.loads(report.read_text())["notebooks"][0]["steps"]
    assert [(s["status"], s["hint"]) for s in steps] == [
        (FAILED, "the kernel died while this cell ran (os._exit(), a crash, or out of memory)"),
        (FAILED, "not run: the kernel died in an earlier cell"),
    ]


def test_a_cell_that_times_out_fails_its_grade_and_every_later_one(workspace: Path) -> None:
    """A hang inside one C call times the grade cell out; the later grade cell, protected, still
    carries the outputs of an earlier passing run, which do not count."""
    cells = [
        _cell(SETUP, "setup"),
        _cell(HANGING, "h"),
        _cell('grade("weight-cache", Hanging, step=1)', "gh"),
        _cell(WRONG, "w"),
        _saved_pass(_cell('grade("weight-cache", Forgetful, step=1)', "gw")),
    ]
    nbformat.write(_learner(*cells), workspace / "mine" / "01_demo.ipynb")
    nbformat.write(_learner(*cells), workspace / "reference" / "01_demo_solution.ipynb")
    report = workspace / "progress.json"
    protect = ["--protect", str(workspace / "reference"), "--json", str(report)]
    assert cli_main(["progress", str(workspace / "mine"), "--timeout", "15", *protect]) == 1
    steps = json.loads(report.read_text())["notebooks"][0]["steps"]
    assert [(s["status"], s["hint"]) for s in steps] == [
        (FAILED, "did not finish within 15 s: a call into your code never returned"),
        (FAILED, "not run: an earlier cell did not finish within 15 s"),
    ]


def test_protected_grading_restores_a_weakened_grade_cell(workspace: Path) -> None:
    """The learner's class has no eviction loop; they lowered the step-2 cell to step 1."""
    reference = _learner(_cell(SETUP, "setup"), _cell('grade("weight-cache", Sized, step=2)', "g2"))
    weakened = _learner(_cell(SETUP, "setup"), _cell('grade("weight-cache", Sized, step=1)', "g2"))
    nbformat.write(reference, workspace / "reference" / "01_demo_solution.ipynb")
    nbformat.write(weakened, workspace / "mine" / "01_demo.ipynb")
    mine = str(workspace / "mine")
    assert cli_main(["progress", mine, "--timeout", "120"]) == 0  # fooled: step 1 passes
    report = workspace / "protected.json"
    protect = ["--protect", str(workspace / "reference"), "--json", str(report)]
    assert cli_main(["progress", mine, *protect]) == 1
    (step,) = json.loads(report.read_text())["notebooks"][0]["steps"]
    assert (step["topic"], step["step"], step["status"]) == ("weight-cache", 2, FAILED)
    assert step["hint"]


def test_bad_paths_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["progress", str(tmp_path / "nothing.txt")]) == 2
    assert cli_main(["progress", str(tmp_path)]) == 2
    assert "no notebooks" in capsys.readouterr().err


def test_the_learner_ci_template_runs_the_same_command() -> None:
    template = Path(__file__).resolve().parent.parent / "docs" / "learner-ci.yml"
    text = template.read_text(encoding="utf-8")
    assert "servelab progress exercises --protect solutions --json progress.json" in text
    assert "pip install -e '.[lab]'" in text  # the light install, as make lab


def test_a_triton_notebook_without_triton_says_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from servelab import progress

    cells = [
        new_code_cell('import os\nos.environ.setdefault("TRITON_INTERPRET", "1")\nimport triton'),
        new_code_cell('grade("paged-kernel", load_block, step=1)'),
    ]
    path = tmp_path / "08_paged_kernel.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a)
    )
    result = progress.run_notebook(path)
    assert [(s.topic, s.step, s.status) for s in result.steps] == [
        ("paged-kernel", 1, progress.FAILED)
    ]
    assert "needs Triton; runs on CPU, fast on GPU" in progress.format_table([result])


def test_the_command_prints_only_its_report_and_progress_bar(workspace: Path) -> None:
    """No kernel warning on stderr (it used to say "Kernel is running over TCP without
    encryption" on every run): the kernel listens on a private Unix socket instead."""
    learner = _learner(_cell(SETUP, "setup"), _cell('grade("weight-cache", Sized, step=1)', "g1"))
    nbformat.write(learner, workspace / "mine" / "01_demo.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "progress", str(workspace / "mine")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=workspace,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED" not in done.stderr and "passed" in done.stdout
    others = [line for line in done.stderr.splitlines() if line.strip() and "01_demo [" not in line]
    assert others == [], done.stderr  # the progress bar, nothing else
    assert not list(workspace.rglob("*kernel*")), "the kernel's sockets are cleaned up"
