"""No import cycle in src/: every module can be imported on its own, at the top of the file.

The import graph is read statically (ast), function-level imports included, so a cycle cannot
hide behind an import moved into a function; only imports under ``if TYPE_CHECKING:`` are
left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(module: str, package: bool, tree: ast.AST, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere in its body."""
    found: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                found |= {alias.name for alias in child.names if alias.name in known}
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = module.split(".")[: None if package else -1]
                    parent = parent[: len(parent) - child.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    if full in known:
                        found.add(full)
                    elif base in known:
                        found.add(base)
            stack.append(child)
    found.discard(module)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports, for every module under ``root``."""
    modules = _modules(root)
    known = set(modules)
    return {
        name: _imported(name, package, ast.parse(path.read_text(encoding="utf-8")), known)
        for name, (path, package) in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_src_has_no_import_cycle() -> None:
    found = cycles(import_graph(SRC))
    assert not found, "import cycles in src/: " + "; ".join(" <-> ".join(c) for c in found)


def test_cycle_finder_finds_a_cycle_and_an_import_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import x\n")
    (package / "b.py").write_text("def f():\n    from . import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
    )
    graph = import_graph(tmp_path)
    assert graph["pkg.d"] == set()
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
