"""The course notebooks: solutions run green, exercises fail only where the learner works.

* Every notebook in ``solutions/`` and ``notebooks/`` passes ``pytest --nbval-lax`` (run as a
  separate process, exactly the command a learner or CI would type).
* Every notebook in ``exercises/``, executed as shipped, fails only in its grade cells, each
  saying its step is not written yet (``StepNotWritten``, a ``NotImplementedError``) with no
  grader frames: a skeleton must not pass any step on its own. Every other cell runs: one that
  reaches a method not written yet prints one line naming it (``servelab.unwritten``), so
  Run All, which stops at the first error, reaches the first grade cell.
* Each notebook's checkpoint line, pasted as its markdown says, hands the grade cell a class
  that passes; so does the README's.
* Re-running cells never changes a grade: every solution notebook, executed with each code cell
  run twice in a row, and each cell with a solution region run first as the learner's stub,
  passes every grade cell.
* ``exercises/`` is what ``tools/notebooks.py`` generates from ``solutions/`` right now.
* Every graded step shows its goal first: a target picture drawn from the reference package,
  before the grade cell, stored with a fallback that renders in an untrusted notebook, unless
  the step is listed in ``NO_TARGET`` with the reason.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook, new_output

from servelab.course_files import exercise_name

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


def _is_grade_cell(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith("grade(")


def _text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def unexpected_outcomes(notebook: nbformat.NotebookNode) -> list[str]:
    """What is wrong with an executed exercise; empty when it fails exactly where it should:
    in every grade cell, with ``StepNotWritten``, and nowhere else."""
    failed: dict[int, list[str]] = {}
    tracebacks: dict[int, str] = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            errors = [o for o in cell.outputs if o.output_type == "error"]
            if errors:
                failed[index] = [o.ename for o in errors]
                tracebacks[index] = "\n".join(line for o in errors for line in o.traceback)
    grade_cells = [i for i, cell in enumerate(notebook.cells) if _is_grade_cell(cell)]
    if not grade_cells:
        return ["no grade cell: the exercise leaves nothing to do"]
    problems = []
    for index, names in failed.items():
        cell = notebook.cells[index]
        if not _is_grade_cell(cell):
            problems.append(
                f"cell {index} ({_first_line(cell.source)!r}) raised {names}: Run All stops there"
            )
        elif any(name != "StepNotWritten" for name in names):
            problems.append(f"cell {index} ({_first_line(cell.source)!r}) raised {names}")
        elif "grading/" in tracebacks[index]:
            problems.append(f"grade cell {index} shows the grader's frames")
    problems += [
        f"grade cell {index} ({_first_line(notebook.cells[index].source)!r}) passes on the "
        "unfinished skeleton"
        for index in grade_cells
        if index not in failed
    ]
    first = notebook.cells[grade_cells[0]]
    if "not written yet" not in _text(first):
        problems.append(f"the first grade cell does not say 'not written yet': {_text(first)!r}")
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


NOT_WRITTEN = "  ✗ step 1: `put` is not written yet\nNOT FINISHED\n"


def _executed(*cells: tuple[str, str | None]) -> nbformat.NotebookNode:
    """A notebook as if run: each cell's source and the name of the error it raised, if any
    (a grade cell that raised also printed that its step is not written yet)."""
    built = []
    for source, error in cells:
        outputs = [new_output("error", ename=error, evalue="", traceback=[])] if error else []
        if error and source.startswith("grade("):
            outputs.insert(0, new_output("stream", name="stdout", text=NOT_WRITTEN))
        built.append(new_code_cell(source, outputs=outputs))
    return new_notebook(cells=built)


def test_the_exercise_check_accepts_failures_in_grade_cells_only() -> None:
    good = _executed(("x = 1", None), ("cache.put(1)", None), ("grade(1)", "StepNotWritten"))
    assert unexpected_outcomes(good) == []
    demo = _executed(("cache.put(1)", "NotImplementedError"), ("grade(1)", "StepNotWritten"))
    assert unexpected_outcomes(demo) == [
        "cell 0 ('cache.put(1)') raised ['NotImplementedError']: Run All stops there"
    ]
    raw = _executed(("f()", None), ("grade('t', C, step=1)", "NotImplementedError"))
    assert unexpected_outcomes(raw) == [
        "cell 1 (\"grade('t', C, step=1)\") raised ['NotImplementedError']"
    ]
    free_pass = _executed(("f()", None), ("grade('t', C, step=1)", None))
    assert "passes on the unfinished skeleton" in unexpected_outcomes(free_pass)[0]
    assert "nothing to do" in unexpected_outcomes(_executed(("x = 1", None)))[0]
    silent = _executed(("grade(1)", "StepNotWritten"))
    silent.cells[0].outputs = silent.cells[0].outputs[1:]
    assert "does not say 'not written yet'" in unexpected_outcomes(silent)[0]


def test_exercises_are_in_sync_with_solutions() -> None:
    problems = _load_tool().check()
    assert not problems, "run `make exercises`:\n" + "\n".join(
        f"  {p.path.relative_to(ROOT)}: {p.reason}" for p in problems
    )


def _run_twice(solution: nbformat.NotebookNode, clear: Any) -> nbformat.NotebookNode:
    """Each code cell twice in a row; a cell with a solution region first as the learner's stub."""
    cells = []
    for cell in solution.cells:
        if cell.cell_type != "code":
            continue
        stub = clear(cell.source)
        if stub != cell.source:
            cells.append(new_code_cell(stub, metadata={"servelab": "stub"}))
        cells += [new_code_cell(cell.source), new_code_cell(cell.source)]
    return new_notebook(cells=cells, metadata=solution.metadata)


@pytest.mark.notebooks
@pytest.mark.parametrize("path", _notebooks("solutions"), ids=_name)
def test_rerunning_cells_never_changes_a_grade(path: Path) -> None:
    notebook = _run_twice(nbformat.read(path, as_version=4), _load_tool().clear_solution_regions)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    problems = []
    for cell in notebook.cells:
        errors = [f"{o.ename}: {o.evalue}"[:300] for o in cell.outputs if o.output_type == "error"]
        stub = cell.metadata.get("servelab") == "stub"
        if errors and not (stub and all(e.startswith("NotImplementedError") for e in errors)):
            problems.append(f"{_first_line(cell.source)!r} raised {errors}")
        if _is_grade_cell(cell):
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            if not text.rstrip().endswith("PASSED"):
                problems.append(f"{_first_line(cell.source)!r} did not pass:\n{text[-1500:]}")
    assert not problems, f"{_name(path)}:\n" + "\n".join(f"  {p}" for p in problems)


# Graded steps with no target picture, each with the reason: a picture of the state would not
# show what the step asks for.
NO_TARGET = {
    # Input validation only: every error leaves the state exactly as it was, so the picture
    # after the step's calls is the picture before them.
    ("03_block_manager", "block-manager", 4): "only about errors",
    # Grades a checker function on states handed to it; nothing of the learner's is drawn.
    ("03_block_manager", "invariant-checker", 3): "a function, not a structure",
    # Hashes and a lookup map, before any block table exists: the block picture shows neither.
    ("05_prefix_caching", "prefix-cache", 1): "nothing in the block picture yet",
    # A cost model: three formulas checked against the simulator; the step prints its table.
    ("06_kv_offload", "kv-offload", 4): "formulas, not a structure",
    # A kernel's target is numbers equal to the oracle's; a failing grade shows the first wrong
    # element, its block and offset, and what the block table said.
    ("08_paged_kernel", "paged-kernel", 1): "a kernel: its target is the oracle's numbers",
    ("08_paged_kernel", "paged-kernel", 2): "a kernel: its target is the oracle's numbers",
    ("08_paged_kernel", "paged-kernel", 3): "a kernel: its target is the oracle's numbers",
}


def _is_target_cell(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and str(cell.get("id", "")).startswith("target-")


def target_problems(notebook: nbformat.NotebookNode, stem: str) -> list[str]:
    """What keeps a solution notebook from showing each graded step's target first."""
    tool = _load_tool()
    classes = {
        node.name
        for cell in notebook.cells
        if cell.cell_type == "code" and tool._parses(cell.source)
        for node in ast.walk(ast.parse(cell.source))
        if isinstance(node, ast.ClassDef)
    }
    problems, targets, graded = [], [], set()
    for cell in notebook.cells:
        if _is_target_cell(cell):
            targets.append(cell)
            names = {n.id for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Name)}
            if names & classes:
                problems.append(f"{cell.id} draws the notebook's own {sorted(names & classes)}")
            if (
                not cell.source.startswith("# Your target for step")
                or '"target: ' not in cell.source
            ):
                problems.append(f"{cell.id}: no '# Your target for step' line or 'target:' title")
            pictures = [o.get("data", {}) for o in cell.outputs]
            if not any("image/svg+xml" in d and "<img" in d.get("text/html", "") for d in pictures):
                problems.append(f"{cell.id}: no stored picture with an <img> fallback")
        if cell.cell_type != "code" or not tool._parses(cell.source):
            continue
        for topic, step, _ in tool._grade_calls(cell.source):
            key = (stem, topic, step)
            graded.add(key)
            if key not in NO_TARGET and not targets:
                problems.append(f"{topic} step {step} has no target cell before its grade cell")
            targets = []
    problems += [
        f"{key} is exempt but not graded" for key in NO_TARGET.keys() - graded if key[0] == stem
    ]
    return problems


@pytest.mark.parametrize("path", _notebooks("solutions"), ids=_name)
def test_every_graded_step_shows_its_target_first(path: Path) -> None:
    stem = Path(exercise_name(path.name)).stem  # NO_TARGET names the exercise
    problems = target_problems(nbformat.read(path, as_version=4), stem)
    assert not problems, f"{_name(path)}:\n" + "\n".join(f"  {p}" for p in problems)


def test_the_target_check_finds_missing_unrenderable_and_self_drawn_targets() -> None:
    picture = new_output(
        "display_data", data={"image/svg+xml": "<svg/>", "text/html": "<img src='x'/>"}
    )
    target = '# Your target for step 1: look here.\nshow(Reference(), title="target: one")'
    cells = [
        new_code_cell("class Mine:\n    pass"),
        new_code_cell(target, id="target-x-step1", outputs=[picture]),
        new_code_cell('grade("topic", Mine, step=1)'),
        new_code_cell('grade("topic", Mine, step=2)'),
        new_code_cell(target.replace("Reference", "Mine"), id="target-x-step3"),
        new_code_cell('grade("topic", Mine, step=3)'),
    ]
    assert target_problems(new_notebook(cells=cells), "nb") == [
        "topic step 2 has no target cell before its grade cell",
        "target-x-step3 draws the notebook's own ['Mine']",
        "target-x-step3: no stored picture with an <img> fallback",
    ]


def _kernel_language_info() -> dict[str, Any]:
    """What the course's kernel reports about its language: JupyterLab saves exactly this."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    try:
        reply = client.kernel_info(reply=True, timeout=60)
        return dict(reply["content"]["language_info"])
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_opening_and_saving_a_notebook_changes_nothing(folder: str, tmp_path: Path) -> None:
    """JupyterLab sets ``language_info`` from the kernel and saves with nbformat: a notebook
    shipped with both already in place is not marked changed, and a save leaves no diff.

    The kernel's Python version is the one field a learner's own Python may still change.
    """
    language = _kernel_language_info()
    for path in _notebooks(folder):
        notebook = nbformat.read(path, as_version=4)
        shipped = dict(notebook.metadata.get("language_info", {}))
        assert {k: v for k, v in shipped.items() if k != "version"} == {
            k: v for k, v in language.items() if k != "version"
        }, f"{_name(path)} does not carry the language_info JupyterLab writes"
        notebook.metadata["language_info"] = {**language, "version": shipped["version"]}
        saved = tmp_path / path.name
        nbformat.write(notebook, saved, version=nbformat.NO_CONVERT)  # as jupyter_server saves
        assert saved.read_bytes() == path.read_bytes(), f"saving {_name(path)} changes it"


def test_nbval_settings_reach_exercises_from_the_root(tmp_path: Path) -> None:
    """The root ``conftest.py`` keeps ``exercises/`` to notebooks only, and nbval run on a
    folder below it still skips comparing stderr (a warning is not part of a lesson)."""
    assert sorted(p.name for p in (ROOT / "exercises").iterdir()) == [
        p.name for p in _notebooks("exercises")
    ], "exercises/ should hold only the learner's notebooks"
    for name in ("conftest.py", "pyproject.toml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    source = '# NBVAL_CHECK_OUTPUT\nimport sys\nprint("out")\nprint("now", file=sys.stderr)'
    stored = [
        new_output("stream", name="stdout", text="out\n"),
        new_output("stream", name="stderr", text="a warning of another day\n"),
    ]
    notebook = new_notebook(cells=[new_code_cell(source, outputs=stored, execution_count=1)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    (tmp_path / "exercises").mkdir()
    nbformat.write(notebook, tmp_path / "exercises" / "x.ipynb")
    command = [sys.executable, "-m", "pytest", "--nbval-lax", "-q", "exercises/"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


_CHECKPOINT_LINE = re.compile(r'^(\w+) = [\w.]*checkpoint\("([\w-]+)", step=(\d+)\)$')


def _checkpoint_line(path: Path) -> str:
    """The line the notebook's checkpoint note says to paste (its one ``python`` block)."""
    notebook = nbformat.read(path, as_version=4)
    notes = [c for c in notebook.cells if str(c.get("id", "")).startswith("checkpoint-")]
    assert len(notes) == 1, f"{_name(path)} should say once how to continue from a checkpoint"
    index = notebook.cells.index(notes[0])
    assert index <= 4, f"{_name(path)}: the checkpoint note is cell {index}, not near the top"
    blocks = re.findall(r"```python\n(.*?)\n```", notes[0].source, flags=re.S)
    assert len(blocks) == 1, notes[0].source
    return str(blocks[0])


def _readme_checkpoint_line() -> str:
    found = re.findall(r"`(\w+ = [\w.]*checkpoint\([^`]*\))`", (ROOT / "README.md").read_text())
    assert len(found) == 1, f"the README should show one checkpoint line, found {found}"
    return str(found[0])


def _pasted_and_graded(path: Path, line: str) -> list[str]:
    """Run the exercise as shipped up to the grade cell the line names, with ``line`` pasted
    in a new cell just below the class cell it replaces; what went wrong, if anything."""
    match = _CHECKPOINT_LINE.match(line)
    assert match, f'{line!r} is not `Name = checkpoint("topic", step=n)`'
    name, topic, step = match.group(1), match.group(2), int(match.group(3))
    tool = _load_tool()
    cells = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        cells.append(new_code_cell(cell.source))
        defines = tool._parses(cell.source) and any(
            isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == name
            for n in ast.parse(cell.source).body
        )
        if defines:
            cells.append(new_code_cell(line, metadata={"servelab": "pasted"}))
        if tool._parses(cell.source) and (topic, step) in {
            (t, n) for t, n, _ in tool._grade_calls(cell.source)
        }:
            break
    else:
        return [f"no grade cell for {topic} step {step}"]
    notebook = new_notebook(cells=cells, metadata=nbformat.read(path, as_version=4).metadata)
    NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    pasted = [c for c in notebook.cells if c.metadata.get("servelab") == "pasted"]
    problems = [] if pasted else [f"no cell defines {name}"]
    for cell in pasted:
        errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
        if errors:
            problems.append(f"the pasted line raised {errors}")
    if not _text(notebook.cells[-1]).rstrip().endswith("PASSED"):
        problems.append(f"step {step} did not pass:\n{_text(notebook.cells[-1])[-1500:]}")
    return problems


@pytest.mark.notebooks
@pytest.mark.parametrize("path", _notebooks("exercises"), ids=_name)
def test_the_checkpoint_line_works_when_pasted(path: Path) -> None:
    problems = _pasted_and_graded(path, _checkpoint_line(path))
    assert not problems, f"{_name(path)}:\n" + "\n".join(f"  {p}" for p in problems)


@pytest.mark.notebooks
def test_the_readme_checkpoint_line_works_when_pasted_into_notebook_01() -> None:
    path = ROOT / "exercises" / "01_weight_cache.ipynb"
    problems = _pasted_and_graded(path, _readme_checkpoint_line())
    assert not problems, "\n".join(problems)
