"""``mine(topic)``: the class you finished in an earlier notebook, for a later one to build on.

A learner builds one system: notebook 04's scheduler runs on the block manager written in 03,
05's prefix cache extends it, and 02's policies plug into 01's cache. A later notebook says::

    BlockManager = servelab.mine("block-manager")

and gets the learner's own final class, graded silently by the topic's grader first. One line
says which class is in use::

    using your BlockManager from notebook 03 (all 4 steps pass)
    using the checkpoint BlockManager: yours in notebook 03 fails step 2 · appends on a boundary

When the earlier notebook fails a step, is not finished, or cannot be found, the topic's last
checkpoint (:func:`stand_in`) stands in, and the line says why.

How it works, and why this way:

* **The saved file, not a live kernel.** Each notebook has its own kernel; nothing portable
  reaches into another one (JupyterLab, JupyterLite's in-browser kernel and Colab share no
  kernel API for it). The notebook file is what every front end has. Edits made since the last
  save are not seen (JupyterLab autosaves every two minutes), so a failing line says "as
  saved".
* **Where the file is.** The kernel's working directory is the notebook's folder in
  JupyterLab, in nbval and in JupyterLite (whose kernel sees the browser's files under
  ``/drive``), so the earlier notebook is looked for beside the current one, then in
  ``exercises/`` below or beside it. Colab opens a notebook from GitHub or Drive with no file
  beside it: there, pass ``path=`` (a Drive path), or the checkpoint stands in, announced.
  Solution notebooks find the earlier solution beside them (``solutions/04`` finds
  ``03_block_manager_solution.ipynb``): under nbval and for a presenter, the solutions are
  "the learner's".
* **Which cells.** The file is read as plain JSON (JupyterLite installs no ``nbformat``). Every
  code cell above the topic's last grade cell, and of each only its definitions: imports,
  ``def``, ``class``, assignments to plain names whose value calls nothing and reads only names
  defined so far (constants such as ``BYTES_PER_PARAMETER = 2``), and ``X = mine(...)`` (a
  notebook that itself builds on an earlier one). Demos, pictures and grade cells never run, so
  loading is quick, quiet, and not stopped by a demo that reaches a stub. A cell that is not
  Python (a ``%pip`` line) is skipped.
* **Which class.** Whatever the topic's last grade cell grades, by its expression there
  (``grade("block-manager", BlockManager, step=4)``), so a learner who renamed the class and
  its grade cell is still followed; for ``eviction-policy`` that is the dict of policies.
* **Deterministic and quiet.** Grading is derandomized; anything the learner's code prints
  while loading or grading is swallowed. A result is remembered per notebook content, so
  running the cell again does not grade again.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import io
import json
import linecache
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from servelab.course_files import solution_name

__all__ = ["CARRIED_TOPICS", "Carried", "UnknownTopic", "carry", "mine", "stand_in"]

#: Each topic that a later notebook can build on, and the notebook that finishes it.
CARRIED_TOPICS: dict[str, str] = {
    "weight-cache": "01_weight_cache.ipynb",
    "eviction-policy": "02_eviction_policies.ipynb",
    "block-manager": "03_block_manager.ipynb",
    "scheduler": "04_scheduler.ipynb",
    "prefix-cache": "05_prefix_caching.ipynb",
}


class UnknownTopic(ValueError):
    """``mine`` was asked for a topic that no notebook finishes."""


@dataclass(frozen=True)
class Carried:
    """What :func:`carry` found: the object to use, whether it is the learner's, and the line
    that says so."""

    topic: str
    value: Any
    yours: bool
    line: str


def _check_topic(topic: str) -> str:
    if not isinstance(topic, str) or topic not in CARRIED_TOPICS:
        raise UnknownTopic(
            f"no earlier notebook finishes topic {topic!r}; choose one of {list(CARRIED_TOPICS)}"
        )
    return CARRIED_TOPICS[topic]


def stand_in(topic: str) -> Any:
    """The topic's last checkpoint: the reference solution of its whole notebook."""
    _check_topic(topic)
    from servelab.checkpoints import checkpoint

    module = sys.modules.get(f"servelab.checkpoints.{topic.replace('-', '_')}")
    if module is None:
        checkpoint(topic, step=1)  # imports the module
        module = sys.modules[f"servelab.checkpoints.{topic.replace('-', '_')}"]
    return checkpoint(topic, step=max(module.STEPS))


def _candidates(name: str, here: Path) -> list[Path]:
    return [
        here / name,
        here / solution_name(name),
        here / "exercises" / name,
        here.parent / "exercises" / name,
    ]


def _grade_call(tree: ast.Module, topic: str) -> tuple[ast.expr, int] | None:
    """(graded expression, step) of the last ``grade(topic, X, step=n)`` in a cell."""
    found = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "grade"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == topic
        ):
            step = next((k.value for k in node.keywords if k.arg == "step"), None)
            if isinstance(step, ast.Constant) and isinstance(step.value, int):
                found = (node.args[1], step.value)
    return found


def _is_mine_call(value: ast.expr) -> bool:
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    return (isinstance(func, ast.Name) and func.id == "mine") or (
        isinstance(func, ast.Attribute) and func.attr == "mine"
    )


def _bound(statement: ast.stmt) -> set[str]:
    """The names a kept statement binds."""
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in statement.names}
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {statement.name}
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _is_definition(statement: ast.stmt, defined: set[str]) -> bool:
    """Imports, functions, classes, ``X = mine(...)``, and constants built from names already
    defined (``PCIE = 50 * GB``): nothing that runs a demo or reads a demo's result."""
    if isinstance(
        statement,
        ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
    ):
        return True
    if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:  # names only: `demo.hand = "b"` changes a demo's object
            if not all(isinstance(n, ast.Name | ast.Tuple | ast.Store) for n in ast.walk(target)):
                return False
        if _is_mine_call(statement.value):
            return True
        for node in ast.walk(statement.value):
            if isinstance(node, ast.Call | ast.Await | ast.Lambda | ast.comprehension):
                return False
            if (
                isinstance(node, ast.Name)
                and node.id not in defined
                and not hasattr(builtins, node.id)
            ):
                return False
        return True
    return False


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _code_cells(path: Path) -> dict[int, str]:
    """Cell index -> source of each code cell. A notebook is JSON; reading it needs no nbformat
    (which JupyterLite does not install)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = {}
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            sources[index] = "".join(source) if isinstance(source, list) else str(source)
    return sources


@dataclass(frozen=True)
class _Loaded:
    value: Any
    names: str
    step: int
    #: What each earlier grade cell of the topic grades, by step (None where it cannot be had).
    earlier: dict[int, Any]


class _NotLoaded(Exception):
    """The earlier notebook cannot give a class; the message is the reason, for the line."""


def _load(path: Path, topic: str, number: str) -> _Loaded:
    """Run the definitions above the topic's last grade cell in a fresh module."""
    try:
        sources = _code_cells(path)
    except Exception as exc:  # an unreadable or half-written file
        raise _NotLoaded(f"notebook {number} cannot be read ({type(exc).__name__})") from None
    cells: list[tuple[int, ast.Module]] = []
    last: tuple[int, ast.expr, int] | None = None
    calls: list[tuple[ast.expr, int]] = []
    for index, source in sources.items():
        tree = _parse(source)
        if tree is None:
            continue
        cells.append((index, tree))
        call = _grade_call(tree, topic)
        if call is not None:
            last = (index, *call)
            calls.append(call)
    if last is None:
        raise _NotLoaded(f"notebook {number} has no grade cell for {topic}")
    grade_index, graded, step = last
    name = f"servelab_notebook_{number}"
    module = types.ModuleType(name)
    module.__dict__["__builtins__"] = builtins
    sys.modules[name] = module  # dataclasses and pickle look classes up by module
    defined: set[str] = set()
    for index, tree in cells:
        if index >= grade_index:
            break
        kept = []
        for statement in tree.body:
            if _is_definition(statement, defined):
                kept.append(statement)
                defined |= _bound(statement)
        if not kept:
            continue
        filename = f"<notebook {number}, cell {index}>"
        source = sources[index]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(ast.Module(body=kept, type_ignores=[]), filename, "exec")
        try:
            exec(code, module.__dict__)
        except Exception as exc:
            raise _NotLoaded(
                f"cell {index} of notebook {number} raised {type(exc).__name__}: {exc}"[:200]
            ) from None
    names = [n.id for n in ast.walk(graded) if isinstance(n, ast.Name)]
    try:
        value = eval(
            compile(ast.Expression(graded), f"<notebook {number}>", "eval"), module.__dict__
        )
    except Exception as exc:
        raise _NotLoaded(
            f"notebook {number} does not define {' and '.join(names) or 'the graded class'} "
            f"above its last grade cell ({type(exc).__name__})"
        ) from None
    earlier = {}
    for expr, number_ in calls:
        if number_ < step:
            try:
                earlier[number_] = eval(
                    compile(ast.Expression(expr), "<grade>", "eval"), module.__dict__
                )
            except Exception:
                earlier[number_] = None
    return _Loaded(value, " and ".join(dict.fromkeys(names)), step, earlier)


_REMEMBERED: dict[tuple[str, str, bytes], Carried] = {}
_depth = 0


@contextlib.contextmanager
def _nested() -> Iterator[bool]:
    """True inside another ``mine`` call (a notebook that builds on an earlier one)."""
    global _depth
    _depth += 1
    try:
        yield _depth > 1
    finally:
        _depth -= 1


def _failing_line(text: str) -> str:
    for line in text.splitlines():
        if line.lstrip().startswith("✗"):
            return line.strip().lstrip("✗").strip()
    return "a check fails"


def _first_unfinished(topic: str, loaded: _Loaded) -> str | None:
    """The report line of the earliest step that is not written yet, graded on its own class:
    the final class names a later step's method, but the learner starts at the first."""
    from servelab.grading import GradeFailure, grade

    for step in sorted(loaded.earlier):
        if loaded.earlier[step] is None:
            continue
        try:
            grade(topic, loaded.earlier[step], step=step, quiet=True)
        except GradeFailure as failed:
            return _failing_line(failed.report.text)
    return None


def _stand_in_line(topic: str, why: str) -> Carried:
    value = stand_in(topic)
    names = " and ".join(value) if isinstance(value, dict) else getattr(value, "__name__", topic)
    return Carried(topic, value, False, f"using the checkpoint {names}: {why}")


def carry(topic: str, *, path: str | os.PathLike[str] | None = None) -> Carried:
    """Find, load and grade the learner's ``topic`` class; nothing is printed.

    ``path`` is the earlier notebook's file; by default it is looked for beside the current
    working directory's notebook and in ``exercises/``. Raises :class:`UnknownTopic` for a
    topic no notebook finishes.
    """
    file_name = _check_topic(topic)
    number = file_name[:2]
    if path is not None:
        given = Path(path)
        if not given.is_file():
            return _stand_in_line(topic, f"no notebook at {os.fspath(path)!r}")
        found = given
    else:
        here = Path.cwd()
        search = next((p for p in _candidates(file_name, here) if p.is_file()), None)
        if search is None:
            return _stand_in_line(
                topic,
                f"no {file_name} beside this notebook or in exercises/ "
                f'(pass path="…/{file_name}" to use yours)',
            )
        found = search
    content = found.read_bytes()
    key = (topic, str(found.resolve()), hashlib.sha256(content).digest())
    if key in _REMEMBERED:
        return _REMEMBERED[key]
    from servelab.grading import GradeFailure, grade
    from servelab.grading.core import StepNotWritten

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            loaded = _load(found, topic, number)
        except _NotLoaded as why:
            carried = _stand_in_line(topic, str(why))
        else:
            try:
                grade(topic, loaded.value, step=loaded.step, quiet=True)
            except StepNotWritten as missing:
                line = _first_unfinished(topic, loaded) or _failing_line(missing.report.text)
                carried = _stand_in_line(
                    topic, f"yours in notebook {number} is not finished ({line})"
                )
            except GradeFailure as failed:
                line = _failing_line(failed.report.text)
                carried = _stand_in_line(
                    topic, f"yours in notebook {number}, as saved, fails {line}"
                )
            else:
                carried = Carried(
                    topic,
                    loaded.value,
                    True,
                    f"using your {loaded.names} from notebook {number} "
                    f"(all {loaded.step} steps pass)",
                )
    _REMEMBERED[key] = carried
    return carried


def mine(
    topic: str, *, path: str | os.PathLike[str] | None = None, out: TextIO | None = None
) -> Any:
    """Your final class for ``topic`` from its earlier notebook, or the checkpoint in its place.

    Prints one line saying which (none when called while another notebook is being loaded).
    """
    with _nested() as nested:
        carried = carry(topic, path=path)
    if not nested:
        print(carried.line, file=out)
    return carried.value
