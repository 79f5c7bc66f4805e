"""``servelab progress``: run a learner's notebooks headless and tabulate every grade cell.

Each notebook runs top to bottom in a fresh kernel, as "Restart and run all" would, with errors
allowed so every grade cell gets its answer. The table has one row per grade cell, named by
notebook, topic and step (notebook 03 grades two topics at step 3): passed, failed (with the
first line of the grader's hint underneath), or not written yet. The exit status is 0 only
when every row says passed, so the same command serves a learner, a CI job on a learner's
fork, and an instructor collecting ``--json``.

**Only this run counts.** Saved outputs are cleared before the run, and a step passes only
when its grade cell ran to completion in this run (the kernel answered) and printed PASSED. A
grade cell that was still running when the kernel died or the cell timed out, or that never
ran because an earlier cell stopped the notebook, has failed.

**Protected grade cells.** Grading runs in the learner's own kernel, so a learner could edit
a grade cell (``step=1`` instead of ``step=3``, or delete the call). With ``protect=solutions/``
every grade cell is first replaced by the cell with the same id in the exercise's solution
notebook (``01_weight_cache.ipynb``'s is ``01_weight_cache_solution.ipynb``; re-importing
``grade`` from the package), and a grade cell the learner deleted counts
as failed. This does not stop deliberate cheating inside the kernel (monkeypatching the
grader); ``servelab grade`` grades classes from files in an isolated process, which stops the
obvious ways but not code written to cheat on purpose.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from servelab.course_files import solution_name

__all__ = [
    "NotebookProgress",
    "StepResult",
    "format_table",
    "grade_calls",
    "main",
    "protect_grade_cells",
    "run_notebook",
]

PASSED, FAILED, NOT_WRITTEN = "passed", "failed", "not written"


@dataclass(frozen=True)
class StepResult:
    """The outcome of one grade cell: which topic and step it grades, and how it went."""

    topic: str
    step: int
    status: str  # PASSED, FAILED or NOT_WRITTEN
    hint: str = ""


@dataclass
class NotebookProgress:
    """Every grade cell of one notebook, in notebook order."""

    name: str
    steps: list[StepResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.steps) and all(s.status == PASSED for s in self.steps)


def grade_calls(source: str) -> list[tuple[str, int]]:
    """``(topic, step)`` of each ``grade(topic, ..., step=N)`` call in a cell's source.

    A topic that is not written as a string literal is ``""``; a call without an integer
    ``step=`` is not a graded step. A cell that does not parse has none.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "grade":
            topic_node = node.args[0] if node.args else None
            step: int | None = None
            for keyword in node.keywords:
                value = getattr(keyword.value, "value", None)
                if keyword.arg == "step" and type(value) is int:
                    step = value
                elif keyword.arg == "topic":
                    topic_node = keyword.value
            topic = getattr(topic_node, "value", None)
            if step is not None:
                calls.append((topic if isinstance(topic, str) else "", step))
    return calls


def _is_grade_cell(cell: Any) -> bool:
    return cell.cell_type == "code" and bool(grade_calls(cell.source))


_REIMPORT = "from servelab.grading import grade  # protected: the package's own grader\n"


def protect_grade_cells(notebook: Any, solution: Any) -> list[tuple[str, int]]:
    """Overwrite ``notebook``'s grade cells with the solution's, matched by cell id.

    Returns the ``(topic, step)`` of each grade cell the learner deleted (they count as failed).
    """
    learner = {cell.get("id"): cell for cell in notebook.cells}
    missing: list[tuple[str, int]] = []
    for cell in solution.cells:
        if not _is_grade_cell(cell):
            continue
        mine = learner.get(cell.get("id"))
        if mine is None or mine.cell_type != "code":
            missing.extend(grade_calls(cell.source))
            continue
        mine.source = _REIMPORT + cell.source
    return missing


def _stdout_lines(outputs: Sequence[Any]) -> list[str]:
    text = "".join(
        str(o.get("text", ""))
        for o in outputs
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )
    return [line.strip() for line in text.splitlines()]


def _outcome(topic: str, step: int, outputs: Sequence[Any]) -> StepResult:
    """Judge a grade cell that ran to completion in this run by what it showed."""
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:
        if "PASSED" in _stdout_lines(outputs):
            return StepResult(topic, step, PASSED)
        return StepResult(topic, step, FAILED, "the grade cell finished without printing PASSED")
    error = errors[0]
    name, value = error.get("ename", ""), str(error.get("evalue", ""))
    if name == "NotImplementedError" or "not written yet" in value:
        return StepResult(topic, step, NOT_WRITTEN)
    hints = [line.strip() for line in value.splitlines() if line.strip().startswith("hint:")]
    if hints:
        return StepResult(topic, step, FAILED, hints[0].removeprefix("hint:").strip())
    first = next((line.strip() for line in value.splitlines() if line.strip()), "")
    return StepResult(topic, step, FAILED, f"{name}: {first}" if first else name)


def _kernel_transport(sockets: Path) -> Any:
    """Where the kernel listens: Unix sockets in a private folder where the system has them.

    Over TCP a kernel's ports on localhost are open to every local user, and ipykernel warns
    about that on every start ("Kernel is running over TCP without encryption"); a socket
    file in a folder only its owner can enter is private, so the kernel has nothing to warn
    about. Windows has no such sockets here and keeps jupyter_client's TCP default.
    """
    from traitlets.config import Config

    config = Config()
    if os.name == "posix":
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(sockets / "kernel")
    return config


def _why_stopped(exc: Exception, timeout: int) -> tuple[str, str]:
    """What to say of the cell that was running when the run stopped, and of the cells after it."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    if isinstance(exc, CellTimeoutError):
        return (
            f"did not finish within {timeout} s: a call into your code never returned",
            f"not run: an earlier cell did not finish within {timeout} s",
        )
    if isinstance(exc, DeadKernelError):
        return (
            "the kernel died while this cell ran (os._exit(), a crash, or out of memory)",
            "not run: the kernel died in an earlier cell",
        )
    return (
        f"did not finish: the run stopped ({type(exc).__name__})",
        f"not run: the run stopped in an earlier cell ({type(exc).__name__})",
    )


NEEDS_TRITON = "needs Triton; runs on CPU, fast on GPU: `make triton` installs it, then run again"


def _needs_triton(notebook: Any) -> bool:
    """A notebook that runs Triton kernels (its setup sets TRITON_INTERPRET) where no triton is
    installed."""
    import importlib.util

    uses = any("TRITON_INTERPRET" in cell.source for cell in notebook.cells)
    return uses and importlib.util.find_spec("triton") is None


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
    missing: list[tuple[str, int]] = []
    if protect is not None:
        solution_path = protect / solution_name(path.name)
        if not solution_path.is_file():
            raise FileNotFoundError(f"--protect: no {solution_path.name} in {protect}")
        solution = nbformat.read(solution_path, as_version=4)  # type: ignore[no-untyped-call]
        missing = protect_grade_cells(notebook, solution)
    for cell in notebook.cells:  # saved outputs are not this run's: only this run counts
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    if _needs_triton(notebook):  # notebook 08: its setup would only fail, every step after it
        progress = NotebookProgress(path.stem)
        for cell in notebook.cells:
            if _is_grade_cell(cell):
                for topic, step in grade_calls(cell.source):
                    progress.steps.append(StepResult(topic, step, FAILED, NEEDS_TRITON))
        return progress
    total = sum(1 for cell in notebook.cells if cell.cell_type == "code")
    started: set[int] = set()
    finished: dict[int, str] = {}  # cell index -> the kernel's reply status

    def execute(cell_index: int, **_: Any) -> None:
        started.add(cell_index)

    def executed(cell_index: int, execute_reply: Any, **_: Any) -> None:
        finished[cell_index] = str(execute_reply.get("content", {}).get("status", ""))
        if on_cell is not None:
            on_cell(len(finished), total)

    running_hint = later_hint = ""
    with tempfile.TemporaryDirectory(prefix="servelab-kernel-") as sockets:
        client = NotebookClient(
            notebook,
            timeout=timeout,
            allow_errors=True,
            resources={"metadata": {"path": str(path.parent)}},
            on_cell_execute=execute,
            on_cell_executed=executed,
            config=_kernel_transport(Path(sockets)),
        )
        try:
            client.execute()
        except Exception as exc:  # a cell that timed out, a kernel that died: report, go on
            running_hint, later_hint = _why_stopped(exc, timeout)
    progress = NotebookProgress(path.stem)
    for index, cell in enumerate(notebook.cells):
        if not _is_grade_cell(cell):
            continue
        for topic, step in grade_calls(cell.source):
            status = finished.get(index)
            if status in ("ok", "error"):
                progress.steps.append(_outcome(topic, step, cell.outputs))
            elif index in started:
                hint = running_hint or "did not finish"
                progress.steps.append(StepResult(topic, step, FAILED, hint))
            else:
                hint = later_hint or "not run"
                progress.steps.append(StepResult(topic, step, FAILED, hint))
    for topic, step in missing:
        progress.steps.append(StepResult(topic, step, FAILED, "the grade cell was deleted"))
    return progress


def format_table(results: Sequence[NotebookProgress]) -> str:
    """One row per grade cell (notebook, topic, step, result); failures numbered, hints below.

    A notebook without a grade cell gets a row too: it has not passed.
    """
    rows: list[tuple[str, str, str, str]] = []
    notes: list[str] = []
    for result in results:
        if not result.steps:
            rows.append((result.name, "-", "-", "no grade cells"))
        for s in result.steps:
            text = s.status
            if s.status == FAILED:
                notes.append(
                    f"[{len(notes) + 1}] {result.name} · {s.topic or '?'} step {s.step}: {s.hint}"
                )
                text = f"failed [{len(notes)}]"
            rows.append((result.name, s.topic or "?", str(s.step), text))
    head = ("notebook", "topic", "step", "result")
    widths = [max(len(row[i]) for row in [head, *rows]) + 2 for i in range(3)]

    def line(row: tuple[str, str, str, str]) -> str:
        return "".join(row[i].ljust(widths[i]) for i in range(3)) + row[3]

    lines = [line(head), "-" * len(line(head))]
    lines += [line(row) for row in rows]
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
