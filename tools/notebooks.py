"""Generate the learner's notebooks in ``exercises/`` from the authors' ``solutions/``.

Authors edit only ``solutions/NN_topic_solution.ipynb``, which generates
``exercises/NN_topic.ipynb`` (see ``servelab.course_files``). Inside a code cell, the lines
between a ``### BEGIN SOLUTION`` line and a ``### END SOLUTION`` line are the learner's work: in
the exercise they become ``# YOUR CODE HERE`` and ``raise NotImplementedError()`` at the indentation
of the ``### BEGIN SOLUTION`` line (the markers nbgrader uses, so either tool reads the files).
A region in a markdown cell becomes a prompt to answer in the learner's own words. Exercises
carry no outputs, execution counts or saved widget state, and are written byte-for-byte
deterministically, so ``--check`` can compare files exactly.

The same pass keeps two more things in step with ``solutions/``:

* **Checkpoints.** ``src/servelab/checkpoints/<topic>.py`` holds the solution code of each
  graded notebook (its imports, and every cell that defines a class, up to the last grade
  cell), so ``servelab.checkpoint("weight-cache", step=3)`` hands a learner who fell behind
  the class that passes step 3. Generated, never edited by hand.
* **Stored outputs.** Saved widget state (``metadata.widgets``) changes on every run and can
  never be shown without a kernel anyway, so it is removed from ``solutions/`` and
  ``notebooks/``, and so is each output's widget view when the output carries a static
  fallback picture beside it (see ``servelab.viz.picture``).

Usage::

    python tools/notebooks.py --write    # regenerate exercises/ and checkpoints, tidy outputs
    python tools/notebooks.py --check    # exit 1 when any of them is out of date
"""

from __future__ import annotations

import argparse
import ast
import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from servelab.course_files import exercise_name

BEGIN_MARKER = "### BEGIN SOLUTION"
END_MARKER = "### END SOLUTION"
CODE_PLACEHOLDER = ("# YOUR CODE HERE", "raise NotImplementedError()")
MARKDOWN_PLACEHOLDER = "*Your answer here.*"

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
EXERCISES_DIR = REPO_ROOT / "exercises"
LECTURES_DIR = REPO_ROOT / "notebooks"
CHECKPOINTS_DIR = REPO_ROOT / "src" / "servelab" / "checkpoints"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# Cell metadata that records a particular run (timings, view state) rather than content.
_RUN_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")
# Notebook metadata worth keeping: what JupyterLab writes on every save (the kernel and its
# language), so a learner who opens an exercise and saves it changes nothing. Anything else
# (saved widget state, tags of the author's tools) is the author's, not the course's.
_KEPT_NOTEBOOK_METADATA = ("kernelspec", "language_info")


class SolutionMarkerError(ValueError):
    """A solution region is malformed: unmatched, nested, or not on a line of its own."""


@dataclass(frozen=True)
class SyncProblem:
    """One exercise that does not match what its solution notebook generates."""

    path: Path
    reason: str


def clear_solution_regions(source: str, *, cell_type: str = "code", where: str = "cell") -> str:
    """Replace each solution region of one cell's source with the learner's placeholder.

    ``where`` names the cell in error messages. Raises :class:`SolutionMarkerError` when a
    region is opened twice, closed without being opened, or left open at the end of the cell.
    """
    if cell_type not in ("code", "markdown"):
        raise ValueError(f"cell_type must be 'code' or 'markdown', got {cell_type!r}")
    out: list[str] = []
    open_line: int | None = None
    for number, line in enumerate(source.split("\n"), start=1):
        stripped = line.strip()
        if stripped == BEGIN_MARKER:
            if open_line is not None:
                raise SolutionMarkerError(
                    f"{where}, line {number}: {BEGIN_MARKER!r} inside the region opened on "
                    f"line {open_line}; close the first region with {END_MARKER!r}"
                )
            open_line = number
            indent = line[: len(line) - len(line.lstrip())]
            if cell_type == "code":
                out.extend(indent + text for text in CODE_PLACEHOLDER)
            else:
                out.append(indent + MARKDOWN_PLACEHOLDER)
        elif stripped == END_MARKER:
            if open_line is None:
                raise SolutionMarkerError(
                    f"{where}, line {number}: {END_MARKER!r} without a matching {BEGIN_MARKER!r}"
                )
            open_line = None
        elif BEGIN_MARKER in line or END_MARKER in line:
            raise SolutionMarkerError(
                f"{where}, line {number}: a solution marker must stand alone on its line "
                f"(found {stripped!r})"
            )
        elif open_line is None:
            out.append(line)
    if open_line is not None:
        raise SolutionMarkerError(
            f"{where}, line {open_line}: {BEGIN_MARKER!r} is never closed; add {END_MARKER!r}"
        )
    return "\n".join(out)


def make_exercise(solution: NotebookNode, *, name: str = "notebook") -> NotebookNode:
    """Return the learner's version of a solution notebook; the input is left untouched."""
    exercise = copy.deepcopy(solution)
    kept = {k: v for k, v in solution.metadata.items() if k in _KEPT_NOTEBOOK_METADATA}
    exercise.metadata = nbformat.from_dict(copy.deepcopy(kept))  # type: ignore[no-untyped-call]
    for index, cell in enumerate(exercise.cells):
        where = f"{name}, cell {index}"
        if cell.cell_type in ("code", "markdown"):
            cell.source = clear_solution_regions(cell.source, cell_type=cell.cell_type, where=where)
        for key in _RUN_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return exercise


def render(notebook: NotebookNode) -> str:
    """Serialize a notebook the same way every time, so files can be compared as text."""
    text: str = nbformat.writes(notebook, version=4)  # type: ignore[no-untyped-call]
    return text + "\n"


def exercise_text(solution_path: Path) -> str:
    """The exact text of the exercise generated from ``solution_path``."""
    solution: NotebookNode = nbformat.read(solution_path, as_version=4)  # type: ignore[no-untyped-call]
    return render(make_exercise(solution, name=solution_path.name))


def _solution_paths(solutions: Path) -> list[Path]:
    """Every solution notebook; one not named ``NN_topic_solution.ipynb`` is an error."""
    paths = sorted(p for p in solutions.glob("*.ipynb") if not p.name.startswith("."))
    for path in paths:
        exercise_name(path.name)
    return paths


def check(solutions: Path = SOLUTIONS_DIR, exercises: Path = EXERCISES_DIR) -> list[SyncProblem]:
    """List every exercise that is missing, stale, or has no solution notebook behind it."""
    problems: list[SyncProblem] = []
    sources = {exercise_name(p.name): p for p in _solution_paths(solutions)}
    expected = {name: exercise_text(path) for name, path in sources.items()}
    for name, text in expected.items():
        target = exercises / name
        if not target.exists():
            problems.append(SyncProblem(target, "missing"))
        elif target.read_text(encoding="utf-8") != text:
            source = sources[name].name
            problems.append(SyncProblem(target, f"differs from what solutions/{source} generates"))
    for stray in sorted(exercises.glob("*.ipynb")):
        if stray.name not in expected:
            problems.append(SyncProblem(stray, "has no notebook in solutions/"))
    return problems


def write(solutions: Path = SOLUTIONS_DIR, exercises: Path = EXERCISES_DIR) -> list[Path]:
    """Regenerate every exercise, remove exercises without a solution; return changed paths.

    Every solution notebook is converted before anything is written, so a malformed region
    in one notebook leaves ``exercises/`` exactly as it was.
    """
    texts = {exercise_name(p.name): exercise_text(p) for p in _solution_paths(solutions)}
    changed: list[Path] = []
    exercises.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        target = exercises / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            changed.append(target)
    for stray in sorted(exercises.glob("*.ipynb")):
        if stray.name not in texts:
            stray.unlink()
            changed.append(stray)
    return changed


# --- stored outputs ------------------------------------------------------------------------


def tidy_outputs(notebook: NotebookNode) -> bool:
    """Drop what changes on every run but shows nothing; True if anything changed.

    That is saved widget state, widget views (a live kernel draws them; the static picture
    beside them is what a reader without a kernel sees, and a view without one keeps its
    ``text/plain`` line) and the per-cell execution timestamps.
    """
    changed = notebook.metadata.pop("widgets", None) is not None
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        if cell.metadata.pop("execution", None) is not None:
            changed = True
        for output in cell.outputs:
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                changed = True
    return changed


def _tidy_paths(folders: list[Path]) -> list[Path]:
    return [p for folder in folders for p in sorted(folder.glob("*.ipynb"))]


def untidy(folders: list[Path]) -> list[SyncProblem]:
    """Notebooks in ``folders`` that still store widget state or widget views."""
    problems = []
    for path in _tidy_paths(folders):
        notebook: NotebookNode = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
        if tidy_outputs(notebook):
            problems.append(SyncProblem(path, "stores widget state or widget views"))
    return problems


def tidy(folders: list[Path]) -> list[Path]:
    """Rewrite the notebooks of ``folders`` without widget state; return the changed paths."""
    changed = []
    for path in _tidy_paths(folders):
        notebook: NotebookNode = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
        if tidy_outputs(notebook):
            path.write_text(render(notebook), encoding="utf-8")
            changed.append(path)
    return changed


# --- checkpoints ---------------------------------------------------------------------------


def _strip_markers(source: str) -> str:
    return "\n".join(
        line for line in source.split("\n") if line.strip() not in (BEGIN_MARKER, END_MARKER)
    )


def _grade_calls(source: str) -> list[tuple[str, int, str]]:
    """(topic, step, graded-object source) of each ``grade("topic", X, step=n)`` in a cell."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "grade"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
        ):
            step = next((k.value for k in node.keywords if k.arg == "step"), None)
            if isinstance(step, ast.Constant) and isinstance(step.value, int):
                graded = ast.get_source_segment(source, node.args[1]) or ""
                calls.append((str(node.args[0].value), step.value, graded))
    return calls


def _parses(source: str) -> bool:
    """False for a cell that is not plain Python (an IPython magic such as ``%pip``)."""
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _defines_class(tree: ast.Module) -> bool:
    """A cell that defines what a grade cell grades: a class, or a Triton kernel (a function
    decorated with ``jit``, which notebook 08 grades; its launcher shares the kernel's cell)."""
    return any(isinstance(node, ast.ClassDef) or _is_kernel(node) for node in tree.body)


def _is_kernel(node: ast.stmt) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    names = {
        n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
        for n in node.decorator_list
    }
    return "jit" in names


def _used_names(trees: list[ast.Module]) -> set[str]:
    return {n.id for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _setup(source: str, used: set[str]) -> list[str]:
    """The statements of the notebook's first cell; imports keep only the names in use.

    Bare calls (``unwritten.install()``) set up the notebook's kernel, not the classes: left out.
    """
    tree = ast.parse(source)
    # names the kept statements use (``os`` in ``if ...: os.environ[...] = ...``) are kept too
    kept_code = [n for n in tree.body if not isinstance(n, ast.Expr | ast.Import | ast.ImportFrom)]
    used = used | {n.id for node in kept_code for n in ast.walk(node) if isinstance(n, ast.Name)}
    lines = []
    for node in tree.body:
        if isinstance(node, ast.Expr):
            continue
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            lines.append(ast.get_source_segment(source, node) or "")
            continue
        kept = [a for a in node.names if (a.asname or a.name).split(".")[0] in used]
        if not kept:
            continue
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
        if isinstance(node, ast.ImportFrom):
            lines.append(f"from {'.' * node.level}{node.module or ''} import {names}")
        else:
            lines.append(f"import {names}")
    return lines


def _carried_forward(tree: ast.Module) -> list[tuple[str, str]]:
    """(name, topic) of each ``X = mine("topic")`` line: the learner's class from an earlier
    notebook, for which a checkpoint uses that notebook's checkpoint (``stand_in``)."""
    found = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name | ast.Attribute)
            and getattr(node.value.func, "id", getattr(node.value.func, "attr", "")) == "mine"
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
        ):
            found.append((node.targets[0].id, str(node.value.args[0].value)))
    return found


def _stand_in_lines(carried: list[tuple[str, str]], used: set[str]) -> list[str]:
    lines = [f"{name} = stand_in({topic!r})" for name, topic in carried if name in used]
    return ["from servelab.carry_forward import stand_in", *lines] if lines else []


def checkpoint_text(solution_path: Path) -> tuple[str, str] | None:
    """(topic, module text) of the checkpoint module for one solution notebook, if graded."""
    solution: NotebookNode = nbformat.read(solution_path, as_version=4)  # type: ignore[no-untyped-call]
    code = [c for c in solution.cells if c.cell_type == "code" and _parses(c.source)]
    steps: dict[int, str] = {}
    topic = None
    last_grade = -1
    for index, cell in enumerate(code):
        for name, step, graded in _grade_calls(cell.source):
            # A notebook's checkpoints are its main topic's, the first it grades (03 also
            # grades the learner's own invariant checker, a function, not a step to resume).
            topic = topic or name
            if name == topic:
                steps[step], last_grade = graded, index
    if topic is None:
        return None
    # The setup is the first cell that imports the package (a Colab install cell may precede it).
    first = next((i for i, c in enumerate(code) if "from servelab" in c.source), 0)
    bodies: list[str] = []
    trees: list[ast.Module] = []
    carried: list[tuple[str, str]] = []
    for cell in code[first + 1 : last_grade]:
        source = _strip_markers(cell.source).strip()
        tree = ast.parse(source)
        carried += _carried_forward(tree)
        if _defines_class(tree):
            bodies.append(source)
            trees.append(tree)
    header = (
        f'"""Checkpoints of the {topic!r} course notebook: its solution, step by step.\n\n'
        f"Generated from solutions/{solution_path.name} by tools/notebooks.py; do not edit.\n"
        f"``servelab.checkpoint({topic!r}, step=n)`` returns what the step-n grade cell "
        'grades.\n"""'
    )
    table = "\n".join(f"    {n}: lambda: {steps[n]}," for n in sorted(steps))
    parts = [
        header,
        "# ruff: noqa\n# mypy: ignore-errors\n",
        "\n".join(_setup(code[first].source, _used_names(trees))),
        "\n".join(_stand_in_lines(carried, _used_names(trees))),
        *bodies,
        f"TOPIC = {topic!r}\nSTEPS = {{\n{table}\n}}",
    ]
    return topic, "\n\n\n".join(p.strip("\n") for p in parts if p) + "\n"


def _module_name(topic: str) -> str:
    return topic.replace("-", "_")


def checkpoint_texts(solutions: Path = SOLUTIONS_DIR) -> dict[str, str]:
    """File name -> text of every checkpoint module the solution notebooks generate."""
    texts = {}
    for path in _solution_paths(solutions):
        made = checkpoint_text(path)
        if made is not None:
            texts[_module_name(made[0]) + ".py"] = made[1]
    return texts


def check_checkpoints(
    solutions: Path = SOLUTIONS_DIR, checkpoints: Path = CHECKPOINTS_DIR
) -> list[SyncProblem]:
    """Checkpoint modules that are missing, stale or without a notebook behind them."""
    problems = []
    expected = checkpoint_texts(solutions)
    for name, text in expected.items():
        target = checkpoints / name
        if not target.exists():
            problems.append(SyncProblem(target, "missing"))
        elif target.read_text(encoding="utf-8") != text:
            problems.append(SyncProblem(target, "differs from what solutions/ generates"))
    for stray in sorted(checkpoints.glob("*.py")):
        if stray.name != "__init__.py" and stray.name not in expected:
            problems.append(SyncProblem(stray, "has no graded notebook in solutions/"))
    return problems


def write_checkpoints(
    solutions: Path = SOLUTIONS_DIR, checkpoints: Path = CHECKPOINTS_DIR
) -> list[Path]:
    """Regenerate the checkpoint modules; return the changed paths."""
    texts = checkpoint_texts(solutions)
    changed = []
    checkpoints.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        target = checkpoints / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            changed.append(target)
    for stray in sorted(checkpoints.glob("*.py")):
        if stray.name != "__init__.py" and stray.name not in texts:
            stray.unlink()
            changed.append(stray)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate exercises/")
    mode.add_argument("--check", action="store_true", help="fail when exercises/ is stale")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR)
    parser.add_argument("--exercises", type=Path, default=EXERCISES_DIR)
    parser.add_argument(
        "--checkpoints", type=Path, default=None, help="default: the package's, for solutions/"
    )
    args = parser.parse_args(argv)
    # Another --solutions folder (a test's) has no checkpoints or lectures of its own.
    own = args.solutions.resolve() == SOLUTIONS_DIR
    checkpoints = args.checkpoints or (CHECKPOINTS_DIR if own else None)
    tidy_folders = [args.solutions, LECTURES_DIR] if own else [args.solutions]
    try:
        if args.write:
            changed = tidy(tidy_folders)
            changed += write(args.solutions, args.exercises)
            if checkpoints is not None:
                changed += write_checkpoints(args.solutions, checkpoints)
            for path in changed:
                print(f"wrote {path}")
            return 0
        problems = check(args.solutions, args.exercises)
        if checkpoints is not None:
            problems += check_checkpoints(args.solutions, checkpoints)
        problems += untidy(tidy_folders)
    except ValueError as error:  # a malformed region (SolutionMarkerError) or file name
        print(f"error: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"{problem.path}: {problem.reason}", file=sys.stderr)
    if problems:
        print("generated files are out of date: run `make exercises`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
