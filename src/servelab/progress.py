"""``servelab progress``: run a learner's notebooks headless and tabulate every grade cell.

Each notebook runs top to bottom in a fresh kernel, as "Restart and run all" would, with errors
allowed so every grade cell gets its answer. The table has one row per notebook and one
column per step: passed, failed (with the first line of the grader's hint underneath), or not
written yet. The exit status is 0 only when every step of every notebook passed, so the same
command serves a learner, a CI job on a learner's fork, and an instructor collecting ``--json``.

**Protected grade cells.** Grading runs in the learner's own kernel, so a learner could edit
a grade cell (``step=1`` instead of ``step=3``, or delete the call). With ``protect=solutions/``
every grade cell is first replaced by the cell with the same id in the solution notebook of the
same name (re-importing ``grade`` from the package), and a grade cell the learner deleted counts
as failed. This does not stop deliberate cheating inside the kernel (monkeypatching the
grader); for that, grade the learner's classes from files with ``servelab grade``.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "NotebookProgress",
    "StepResult",
    "format_table",
    "grade_steps",
    "main",
    "protect_grade_cells",
    "run_notebook",
]

PASSED, FAILED, NOT_WRITTEN = "passed", "failed", "not written"


@dataclass(frozen=True)
class StepResult:
    """The outcome of one grade cell."""

    step: int
    status: str  # PASSED, FAILED or NOT_WRITTEN
    hint: str = ""


@dataclass
class NotebookProgress:
    """Every graded step of one notebook, in step order."""

    name: str
    steps: list[StepResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.steps) and all(s.status == PASSED for s in self.steps)


def grade_steps(source: str) -> list[int]:
    """The ``step=`` of each ``grade(...)`` call in a cell's source (empty if none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    steps = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "grade":
            for keyword in node.keywords:
                number = getattr(keyword.value, "value", None)
                if keyword.arg == "step" and type(number) is int:
                    steps.append(number)
    return steps


def _is_grade_cell(cell: Any) -> bool:
    return cell.cell_type == "code" and bool(grade_steps(cell.source))


_REIMPORT = "from servelab.grading import grade  # protected: the package's own grader\n"


def protect_grade_cells(notebook: Any, solution: Any) -> list[int]:
    """Overwrite ``notebook``'s grade cells with the solution's, matched by cell id.

    Returns the steps whose grade cell the learner deleted (they count as failed).
    """
    learner = {cell.get("id"): cell for cell in notebook.cells}
    missing: list[int] = []
    for cell in solution.cells:
        if not _is_grade_cell(cell):
            continue
        mine = learner.get(cell.get("id"))
        if mine is None or mine.cell_type != "code":
            missing.extend(grade_steps(cell.source))
            continue
        mine.source = _REIMPORT + cell.source
    return missing


def _outcome(step: int, outputs: Sequence[Any]) -> StepResult:
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:
        return StepResult(step, PASSED)
    error = errors[0]
    name, value = error.get("ename", ""), str(error.get("evalue", ""))
    if name == "NotImplementedError" or "not written yet" in value:
        return StepResult(step, NOT_WRITTEN)
    hints = [line.strip() for line in value.splitlines() if line.strip().startswith("hint:")]
    if hints:
        return StepResult(step, FAILED, hints[0].removeprefix("hint:").strip())
    first = next((line.strip() for line in value.splitlines() if line.strip()), "")
    return StepResult(step, FAILED, f"{name}: {first}" if first else name)


def run_notebook(
    path: Path,
    *,
    protect: Path | None = None,
    timeout: int = 300,
    on_cell: Callable[[int, int], None] | None = None,
) -> NotebookProgress:
    """Execute one notebook in a fresh kernel and collect its grade cells' outcomes."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    missing: list[int] = []
    if protect is not None:
        solution_path = protect / path.name
        if not solution_path.is_file():
            raise FileNotFoundError(f"--protect: no {path.name} in {protect}")
        solution = nbformat.read(solution_path, as_version=4)  # type: ignore[no-untyped-call]
        missing = protect_grade_cells(notebook, solution)
    total = sum(1 for cell in notebook.cells if cell.cell_type == "code")
    done = 0

    def executed(**_: Any) -> None:
        nonlocal done
        done += 1
        if on_cell is not None:
            on_cell(done, total)

    client = NotebookClient(
        notebook,
        timeout=timeout,
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=executed,
    )
    stopped = ""
    try:
        client.execute()
    except Exception as exc:  # a cell that timed out, a kernel that died: report, go on
        stopped = f"the notebook stopped before this cell ({type(exc).__name__})"
    progress = NotebookProgress(path.stem)
    for cell in notebook.cells:
        if _is_grade_cell(cell):
            ran = cell.get("execution_count") is not None or cell.outputs
            for step in grade_steps(cell.source):
                if stopped and not ran:
                    progress.steps.append(StepResult(step, FAILED, stopped))
                else:
                    progress.steps.append(_outcome(step, cell.outputs))
    for step in missing:
        progress.steps.append(StepResult(step, FAILED, "the grade cell was deleted"))
    progress.steps.sort(key=lambda s: s.step)
    return progress


def format_table(results: Sequence[NotebookProgress]) -> str:
    """One row per notebook, one column per step; failures numbered, hints listed below."""
    width = max((s.step for r in results for s in r.steps), default=0)
    name_w = 2 + max([len("notebook"), *(len(r.name) for r in results)])
    col_w = 14
    head = "notebook".ljust(name_w) + "".join(f"step {n}".ljust(col_w) for n in range(1, width + 1))
    lines = [head.rstrip(), "-" * len(head.rstrip())]
    notes: list[str] = []
    for result in results:
        by_step = {s.step: s for s in result.steps}
        row = result.name.ljust(name_w)
        for n in range(1, width + 1):
            s = by_step.get(n)
            if s is None:
                text = ""
            elif s.status == FAILED:
                notes.append(f"[{len(notes) + 1}] {result.name} step {n}: {s.hint}")
                text = f"failed [{len(notes)}]"
            else:
                text = s.status
            row += text.ljust(col_w)
        lines.append(row.rstrip())
    passed = sum(s.status == PASSED for r in results for s in r.steps)
    total = sum(len(r.steps) for r in results)
    lines += ["", f"{passed} of {total} steps passed", *notes]
    return "\n".join(lines)


def _bar(out: TextIO, label: str) -> Callable[[int, int], None]:
    """A one-line progress bar on a terminal; on a log (CI), one line per notebook."""
    live = out.isatty()

    def show(done: int, total: int) -> None:
        if not live and done < total:
            return
        filled = round(24 * done / max(total, 1))
        out.write(f"\r{label} [{'#' * filled}{'.' * (24 - filled)}] {done}/{total} cells")
        out.flush()

    return show


def main(
    paths: Sequence[Path],
    *,
    json_path: Path | None = None,
    protect: Path | None = None,
    timeout: int = 300,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run every notebook found in ``paths`` (files or folders); 0 when every step passed."""
    out, err = out or sys.stdout, err or sys.stderr
    notebooks: list[Path] = []
    for path in paths:
        if path.is_dir():
            notebooks += sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
        elif path.suffix == ".ipynb" and path.is_file():
            notebooks.append(path)
        else:
            print(f"error: {path} is not a notebook or a folder of notebooks", file=err)
            return 2
    if not notebooks:
        print("error: no notebooks to run", file=err)
        return 2
    results = []
    for index, path in enumerate(notebooks, start=1):
        label = f"{index}/{len(notebooks)} {path.stem}"
        result = run_notebook(path, protect=protect, timeout=timeout, on_cell=_bar(err, label))
        err.write("\n")
        results.append(result)
    print(format_table(results), file=out)
    all_passed = all(r.passed for r in results)
    if json_path is not None:
        record = {
            "passed": all_passed,
            "notebooks": [
                {"name": r.name, "passed": r.passed, "steps": [asdict(s) for s in r.steps]}
                for r in results
            ],
        }
        json_path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return 0 if all_passed else 1
