"""The exercise generator: solution regions become skeletons, and --check notices drift."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

TOOL = Path(__file__).resolve().parent.parent / "tools" / "notebooks.py"


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("servelab_tools_notebooks", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


nbtool = _load_tool()

SOLVED_METHOD = """\
class Cache:
    def get(self, key):
        ### BEGIN SOLUTION
        self._touch(key)
        return self._items[key]
        ### END SOLUTION

    def size(self):
        return 0
"""


def test_region_becomes_skeleton_at_its_indentation() -> None:
    cleared = nbtool.clear_solution_regions(SOLVED_METHOD)
    assert cleared.splitlines() == [
        "class Cache:",
        "    def get(self, key):",
        "        # YOUR CODE HERE",
        "        raise NotImplementedError()",
        "",
        "    def size(self):",
        "        return 0",
    ]
    assert "_touch" not in cleared


def test_skeleton_still_compiles_and_raises_not_implemented() -> None:
    namespace: dict[str, object] = {}
    exec(nbtool.clear_solution_regions(SOLVED_METHOD), namespace)
    cache = namespace["Cache"]()  # type: ignore[operator]
    assert cache.size() == 0
    with pytest.raises(NotImplementedError):
        cache.get("k")


def test_every_region_is_replaced_and_the_rest_kept() -> None:
    source = (
        "a = 1\n### BEGIN SOLUTION\nb = 2\n### END SOLUTION\n"
        "c = 3\n### BEGIN SOLUTION\nd = 4\n### END SOLUTION"
    )
    cleared = nbtool.clear_solution_regions(source)
    assert cleared.count("raise NotImplementedError()") == 2
    assert "a = 1" in cleared and "c = 3" in cleared
    assert "b = 2" not in cleared and "d = 4" not in cleared


def test_source_without_regions_is_unchanged() -> None:
    source = "x = 1\n\ndef f():\n    return x\n"
    assert nbtool.clear_solution_regions(source) == source


def test_markdown_region_becomes_a_prompt() -> None:
    source = (
        "Why evict the oldest?\n\n"
        "### BEGIN SOLUTION\nBecause recency predicts reuse.\n### END SOLUTION"
    )
    cleared = nbtool.clear_solution_regions(source, cell_type="markdown")
    assert "recency predicts" not in cleared
    assert nbtool.MARKDOWN_PLACEHOLDER in cleared
    assert "NotImplementedError" not in cleared


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without a matching"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside the region"),
        ("x = 1  ### BEGIN SOLUTION\n", "stand alone"),
    ],
)
def test_malformed_regions_raise_and_say_where(source: str, fragment: str) -> None:
    with pytest.raises(nbtool.SolutionMarkerError, match=fragment) as caught:
        nbtool.clear_solution_regions(source, where="01_x.ipynb, cell 3")
    assert "01_x.ipynb, cell 3" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_unknown_cell_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="cell_type"):
        nbtool.clear_solution_regions("x", cell_type="raw")


def _solution_notebook() -> nbformat.NotebookNode:
    code = new_code_cell(
        "def f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION\nf()",
        execution_count=7,
        outputs=[new_output("execute_result", {"text/plain": "42"}, execution_count=7)],
        metadata={"execution": {"iopub.status.busy": "2026-01-01T00:00:00Z"}, "tags": ["keep"]},
    )
    notebook = new_notebook(cells=[new_markdown_cell("# Title"), code])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    notebook.metadata["widgets"] = {"state": {"abc": {}}}
    return notebook


def test_exercise_has_no_outputs_counts_or_run_metadata() -> None:
    solution = _solution_notebook()
    exercise = nbtool.make_exercise(solution)
    code = exercise.cells[1]
    assert code.outputs == []
    assert code.execution_count is None
    assert "execution" not in code.metadata
    assert code.metadata["tags"] == ["keep"]
    assert set(exercise.metadata) == {"kernelspec", "language_info"}
    assert "return 42" not in code.source
    # the solution itself is untouched
    assert solution.cells[1].execution_count == 7
    assert "return 42" in solution.cells[1].source
    assert "widgets" in solution.metadata


def test_exercise_keeps_cell_ids_and_text_is_deterministic() -> None:
    solution = _solution_notebook()
    first = nbtool.render(nbtool.make_exercise(solution))
    second = nbtool.render(nbtool.make_exercise(nbformat.reads(nbformat.writes(solution), 4)))
    assert first == second
    exercise = nbformat.reads(first, as_version=4)
    assert [c.id for c in exercise.cells] == [c.id for c in solution.cells]
    nbformat.validate(exercise)


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    nbformat.write(_solution_notebook(), solutions / "01_demo_solution.ipynb")
    return solutions, exercises


def test_check_reports_missing_then_write_fixes_it(tmp_path: Path) -> None:
    solutions, exercises = _tree(tmp_path)
    problems = nbtool.check(solutions, exercises)
    assert [(p.path.name, p.reason) for p in problems] == [("01_demo.ipynb", "missing")]
    assert [p.name for p in nbtool.write(solutions, exercises)] == ["01_demo.ipynb"]
    assert nbtool.check(solutions, exercises) == []
    assert nbtool.write(solutions, exercises) == []  # a second write changes nothing


def test_check_notices_an_edited_solution_and_a_stray_exercise(tmp_path: Path) -> None:
    solutions, exercises = _tree(tmp_path)
    nbtool.write(solutions, exercises)
    edited = nbformat.read(solutions / "01_demo_solution.ipynb", as_version=4)
    edited.cells[0].source = "# A new title"
    nbformat.write(edited, solutions / "01_demo_solution.ipynb")
    (exercises / "02_orphan.ipynb").write_text("{}", encoding="utf-8")
    reasons = {p.path.name: p.reason for p in nbtool.check(solutions, exercises)}
    assert set(reasons) == {"01_demo.ipynb", "02_orphan.ipynb"}
    assert "differs" in reasons["01_demo.ipynb"]
    assert "no notebook in solutions" in reasons["02_orphan.ipynb"]
    nbtool.write(solutions, exercises)
    assert nbtool.check(solutions, exercises) == []
    assert not (exercises / "02_orphan.ipynb").exists()


def test_output_only_changes_in_solution_do_not_make_exercises_stale(tmp_path: Path) -> None:
    solutions, exercises = _tree(tmp_path)
    nbtool.write(solutions, exercises)
    rerun = nbformat.read(solutions / "01_demo_solution.ipynb", as_version=4)
    rerun.cells[1].outputs = []
    rerun.cells[1].execution_count = 99
    nbformat.write(rerun, solutions / "01_demo_solution.ipynb")
    assert nbtool.check(solutions, exercises) == []


def test_a_malformed_notebook_writes_nothing(tmp_path: Path) -> None:
    solutions, exercises = _tree(tmp_path)
    broken = new_notebook(cells=[new_code_cell("### BEGIN SOLUTION\nx = 1")])
    nbformat.write(broken, solutions / "00_broken_solution.ipynb")
    with pytest.raises(nbtool.SolutionMarkerError, match=r"00_broken_solution\.ipynb, cell 0"):
        nbtool.write(solutions, exercises)
    assert not (exercises / "01_demo.ipynb").exists()


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    solutions, exercises = _tree(tmp_path)
    dirs = ["--solutions", str(solutions), "--exercises", str(exercises)]
    assert nbtool.main(["--check", *dirs]) == 1
    assert "make exercises" in capsys.readouterr().err
    assert nbtool.main(["--write", *dirs]) == 0
    assert nbtool.main(["--check", *dirs]) == 0
    nbformat.write(
        new_notebook(cells=[new_code_cell("### END SOLUTION")]), solutions / "02_bad_solution.ipynb"
    )
    assert nbtool.main(["--check", *dirs]) == 2
    assert "02_bad_solution.ipynb" in capsys.readouterr().err


def test_a_solution_not_named_for_its_exercise_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``01_demo.ipynb`` in solutions/ would give the exercise's tab the solution's title."""
    solutions, exercises = _tree(tmp_path)
    nbformat.write(_solution_notebook(), solutions / "02_plain.ipynb")
    dirs = ["--solutions", str(solutions), "--exercises", str(exercises)]
    assert nbtool.main(["--write", *dirs]) == 2
    assert "NN_topic_solution.ipynb: '02_plain.ipynb'" in capsys.readouterr().err
    assert not exercises.exists()
