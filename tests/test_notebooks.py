"""The course notebooks: solutions run green, exercises fail only where the learner works.

* Every notebook in ``solutions/`` and ``notebooks/`` passes ``pytest --nbval-lax`` (run as a
  separate process, exactly the command a learner or CI would type).
* Every notebook in ``exercises/``, executed as shipped, fails only with
  ``NotImplementedError``, fails at least once, and fails in every grade cell: a skeleton must
  not pass any step on its own.
* ``exercises/`` is what ``tools/notebooks.py`` generates from ``solutions/`` right now.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parent.parent
CELL_TIMEOUT_S = 120


def _notebooks(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((ROOT / folder).glob("*.ipynb"))]


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "servelab_tools_notebooks", ROOT / "tools" / "notebooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _hypothesis_storage_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels inherit this, so no ``.hypothesis/`` folder appears beside the notebooks."""
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path / "hypothesis"))


@pytest.mark.notebooks
@pytest.mark.parametrize("path", _notebooks("solutions", "notebooks"), ids=_name)
def test_notebook_passes_nbval(path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval-lax",
        f"--nbval-cell-timeout={CELL_TIMEOUT_S}",
        "-q",
        str(path.relative_to(ROOT)),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (
        f"{' '.join(command[2:])} failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    )


def _first_line(source: str) -> str:
    return next((line for line in source.splitlines() if line.strip()), "")[:70]


def unexpected_outcomes(notebook: nbformat.NotebookNode) -> list[str]:
    """What is wrong with an executed exercise; empty when it fails exactly where it should."""
    failed: dict[int, list[str]] = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            names = [o.ename for o in cell.outputs if o.output_type == "error"]
            if names:
                failed[index] = names
    if not failed:
        return ["no cell raised NotImplementedError: the exercise leaves nothing to do"]
    problems = [
        f"cell {index} ({_first_line(notebook.cells[index].source)!r}) raised {names}"
        for index, names in failed.items()
        if any(name != "NotImplementedError" for name in names)
    ]
    problems += [
        f"grade cell {index} ({_first_line(cell.source)!r}) passes on the unfinished skeleton"
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and "grade(" in cell.source and index not in failed
    ]
    return problems


@pytest.mark.notebooks
@pytest.mark.parametrize("path", _notebooks("exercises"), ids=_name)
def test_exercise_fails_only_where_the_learner_works(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    problems = unexpected_outcomes(notebook)
    assert not problems, f"{_name(path)}:\n" + "\n".join(f"  {p}" for p in problems)


def _executed(*cells: tuple[str, str | None]) -> nbformat.NotebookNode:
    """A notebook as if run: each cell's source and the name of the error it raised, if any."""
    built = []
    for source, error in cells:
        outputs = [new_output("error", ename=error, evalue="", traceback=[])] if error else []
        built.append(new_code_cell(source, outputs=outputs))
    return new_notebook(cells=built)


def test_the_exercise_check_accepts_only_not_implemented_failures() -> None:
    good = _executed(
        ("x = 1", None),
        ("cache.put(1)", "NotImplementedError"),
        ("grade(1)", "NotImplementedError"),
    )
    assert unexpected_outcomes(good) == []
    leaked = _executed(("cache.put(1)", "NotImplementedError"), ("print(cache)", "NameError"))
    assert unexpected_outcomes(leaked) == ["cell 1 ('print(cache)') raised ['NameError']"]
    free_pass = _executed(("f()", "NotImplementedError"), ("grade('t', C, step=1)", None))
    assert "passes on the unfinished skeleton" in unexpected_outcomes(free_pass)[0]
    assert "nothing to do" in unexpected_outcomes(_executed(("x = 1", None)))[0]


def test_exercises_are_in_sync_with_solutions() -> None:
    problems = _load_tool().check()
    assert not problems, "run `make exercises`:\n" + "\n".join(
        f"  {p.path.relative_to(ROOT)}: {p.reason}" for p in problems
    )
