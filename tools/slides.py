"""Build reveal.js slides from the course notebooks, with slide breaks taken from headings.

The notebooks carry no slide metadata (nobody should maintain it by hand); this script assigns
it on a copy at build time: a ``#`` or ``##`` heading starts a new slide; a ``###`` heading, or
a paragraph that follows code, starts a sub-slide (down), so each explanation and its code
share one screen; every other cell continues the current one. Then nbconvert's ``slides``
exporter writes one HTML file per notebook.

Usage::

    python tools/slides.py --out build/slides            # lectures and solutions
    python tools/slides.py --out build/slides notebooks/cold_start_economics.ipynb

Open the ``.slides.html`` files in a browser. reveal.js itself is loaded from
``--reveal-prefix`` (default: a CDN); point it at a local copy for a room without internet.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCES = ["notebooks", "solutions"]
DEFAULT_REVEAL = "https://unpkg.com/reveal.js@4.0.2"


def slide_type(cell: NotebookNode, previous: NotebookNode | None = None) -> str:
    """``slide``, ``subslide`` or ``-`` (continue), from the cell's first line."""
    if cell.cell_type != "markdown":
        return "-"
    first = cell.source.lstrip().split("\n", 1)[0]
    if first.startswith(("# ", "## ")):
        return "slide"
    if first.startswith("### ") or (previous is not None and previous.cell_type == "code"):
        return "subslide"
    return "-"


def with_slides(notebook: NotebookNode) -> NotebookNode:
    """A copy of ``notebook`` with slide metadata on every cell; the input is untouched."""
    deck = copy.deepcopy(notebook)
    for index, cell in enumerate(deck.cells):
        kind = slide_type(cell, deck.cells[index - 1] if index else None)
        if index == 0 and kind == "-":
            kind = "slide"
        cell.metadata["slideshow"] = {"slide_type": kind}
    return deck


def build(paths: list[Path], out: Path, reveal_prefix: str = DEFAULT_REVEAL) -> list[Path]:
    """Write one ``<name>.slides.html`` per notebook into ``out``; return their paths."""
    from nbconvert import SlidesExporter

    exporter = SlidesExporter()
    exporter.reveal_url_prefix = reveal_prefix
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
        body, _ = exporter.from_notebook_node(with_slides(notebook))
        target = out / f"{path.stem}.slides.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "slides")
    parser.add_argument("--reveal-prefix", default=DEFAULT_REVEAL)
    args = parser.parse_args(argv)
    paths = args.paths or [
        p for folder in DEFAULT_SOURCES for p in sorted((ROOT / folder).glob("*.ipynb"))
    ]
    for target in build(paths, args.out, args.reveal_prefix):
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
