"""Re-run notebooks in place, so their stored outputs are what the current code draws.

Each notebook runs top to bottom in a fresh kernel started in its own folder (as nbval does);
a cell that raises stops the run and nothing is written. Afterwards the outputs are tidied as
``tools/notebooks.py --write`` does (no saved widget state), so re-running does not churn
the repository.

Usage::

    python tools/execute_notebooks.py solutions/01_weight_cache_solution.ipynb notebooks/*.ipynb
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def _notebooks_tool() -> object:
    spec = importlib.util.spec_from_file_location("servelab_tools_notebooks", HERE / "notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def execute(path: Path, timeout: int = 600) -> None:
    """Run ``path`` and write it back with fresh, tidy outputs."""
    tool = _notebooks_tool()
    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    NotebookClient(
        notebook, timeout=timeout, resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    tool.tidy_outputs(notebook)  # type: ignore[attr-defined]
    notebook.metadata.pop("widgets", None)
    path.write_text(tool.render(notebook), encoding="utf-8")  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    for path in args.paths:
        print(f"running {path}", flush=True)
        execute(path, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
