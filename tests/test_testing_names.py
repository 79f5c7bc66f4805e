"""One name per role in ``servelab.testing``: a module with a state machine exports the
``INVARIANTS`` registry its rule ids come from, and a module named after a topic calls its
machine ``<topic>_machine``. Read from the source, so no module (torch's included) is loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import servelab.testing as testing
from servelab.grading.registry import TOPICS

MODULES = sorted(p for p in Path(testing.__file__).parent.glob("*.py") if p.stem != "__init__")


def _top_level(path: Path) -> tuple[set[str], set[str]]:
    """The module's top-level function names, and the names in its ``__all__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    exported: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            exported = set(ast.literal_eval(node.value))  # type: ignore[union-attr]
    return functions, exported


def test_the_modules_are_found() -> None:
    assert {"weight_cache", "kv_offload", "token_budget", "policies"} <= {p.stem for p in MODULES}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_a_module_with_a_machine_exports_its_invariants_and_names_it_after_its_topic(
    path: Path,
) -> None:
    functions, exported = _top_level(path)
    machines = {f for f in functions if f.endswith("_machine")}
    if not machines:
        return  # helpers (core, bounded) and the kernel's cases: no machine, no rule ids
    assert "INVARIANTS" in exported, f"{path.name} has {sorted(machines)} but no INVARIANTS"
    if path.stem.replace("_", "-") in TOPICS:
        assert f"{path.stem}_machine" in exported & machines, sorted(machines)
