"""``make slides``: slide breaks come from headings, and nbconvert builds a reveal.js deck."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("servelab_tools_slides", ROOT / "tools/slides.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _deck() -> nbformat.NotebookNode:
    return new_notebook(
        cells=[
            new_markdown_cell("# Title\n\nintro"),
            new_code_cell("x = 1"),
            new_markdown_cell("Why x is 1."),
            new_markdown_cell("More about x."),
            new_markdown_cell("## Step 1"),
            new_markdown_cell("### A detail"),
            new_code_cell("y = 2"),
        ]
    )


def test_slide_breaks_follow_headings_and_prose_after_code() -> None:
    notebook = _deck()
    deck = _tool().with_slides(notebook)
    kinds = [c.metadata["slideshow"]["slide_type"] for c in deck.cells]
    assert kinds == ["slide", "-", "subslide", "-", "slide", "subslide", "-"]
    assert all("slideshow" not in c.metadata for c in notebook.cells)  # input untouched


def test_build_writes_a_reveal_deck(tmp_path: Path) -> None:
    pytest.importorskip("nbconvert")
    source = tmp_path / "deck.ipynb"
    nbformat.write(_deck(), source)
    (written,) = _tool().build([source], tmp_path / "out", reveal_prefix="reveal.js")
    html = written.read_text(encoding="utf-8")
    assert written.name == "deck.slides.html"
    assert html.count("<section") >= 4 and "reveal.js/dist/reveal.js" in html
