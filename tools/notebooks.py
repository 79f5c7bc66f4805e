"""Generate the learner's notebooks in ``exercises/`` from the authors' ``solutions/``.

Authors edit only ``solutions/NN_topic.ipynb``. Inside a code cell, the lines between a
``### BEGIN SOLUTION`` line and a ``### END SOLUTION`` line are the learner's work: in the
exercise they become ``# YOUR CODE HERE`` and ``raise NotImplementedError()`` at the indentation
of the ``### BEGIN SOLUTION`` line (the markers nbgrader uses, so either tool reads the files).
A region in a markdown cell becomes a prompt to answer in the learner's own words. Exercises
carry no outputs, execution counts or saved widget state, and are written byte-for-byte
deterministically, so ``--check`` can compare files exactly.

Usage::

    python tools/notebooks.py --write    # regenerate exercises/ from solutions/
    python tools/notebooks.py --check    # exit 1 when exercises/ is out of date
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

BEGIN_MARKER = "### BEGIN SOLUTION"
END_MARKER = "### END SOLUTION"
CODE_PLACEHOLDER = ("# YOUR CODE HERE", "raise NotImplementedError()")
MARKDOWN_PLACEHOLDER = "*Your answer here.*"

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
EXERCISES_DIR = REPO_ROOT / "exercises"

# Cell metadata that records a particular run (timings, view state) rather than content.
_RUN_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")
# Notebook metadata worth keeping; anything else (saved widget state, the exact Python
# version of the author's kernel) would make the exercise depend on the author's machine.
_KEPT_NOTEBOOK_METADATA = ("kernelspec",)


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
    return sorted(p for p in solutions.glob("*.ipynb") if not p.name.startswith("."))


def check(solutions: Path = SOLUTIONS_DIR, exercises: Path = EXERCISES_DIR) -> list[SyncProblem]:
    """List every exercise that is missing, stale, or has no solution notebook behind it."""
    problems: list[SyncProblem] = []
    expected = {p.name: exercise_text(p) for p in _solution_paths(solutions)}
    for name, text in expected.items():
        target = exercises / name
        if not target.exists():
            problems.append(SyncProblem(target, "missing"))
        elif target.read_text(encoding="utf-8") != text:
            problems.append(SyncProblem(target, f"differs from what solutions/{name} generates"))
    for stray in sorted(exercises.glob("*.ipynb")):
        if stray.name not in expected:
            problems.append(SyncProblem(stray, "has no notebook in solutions/"))
    return problems


def write(solutions: Path = SOLUTIONS_DIR, exercises: Path = EXERCISES_DIR) -> list[Path]:
    """Regenerate every exercise, remove exercises without a solution; return changed paths.

    Every solution notebook is converted before anything is written, so a malformed region
    in one notebook leaves ``exercises/`` exactly as it was.
    """
    texts = {p.name: exercise_text(p) for p in _solution_paths(solutions)}
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate exercises/")
    mode.add_argument("--check", action="store_true", help="fail when exercises/ is stale")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR)
    parser.add_argument("--exercises", type=Path, default=EXERCISES_DIR)
    args = parser.parse_args(argv)
    try:
        if args.write:
            for path in write(args.solutions, args.exercises):
                print(f"wrote {path}")
            return 0
        problems = check(args.solutions, args.exercises)
    except SolutionMarkerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"{problem.path}: {problem.reason}", file=sys.stderr)
    if problems:
        print("exercises/ is out of date: run `make exercises`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
