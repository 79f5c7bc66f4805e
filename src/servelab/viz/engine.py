"""Step through an engine run: queues, block tables with refcounts, and the slots each
sequence's attention read.

A recorded run (``EngineSkeleton(..., record=True)``, one
:class:`~servelab.kv.learner_engine.StepRecord` per step) is drawn one step at a time, out of
the pictures the course already has:

* the scheduler's queues after the step: running (oldest first), waiting (next to admit
  first), and who was prefilled (with its cached tokens), preempted or finished in it;
* the block manager after the step, drawn by :func:`~servelab.viz.blocks.render_blocks`
  (the physical grid with refcounts, the tables as rows, copy-on-write arrows);
* the slots the attention kernel read for each computed sequence, in position order, as
  ``block:offset`` cells: a cell in a shared block (refcount > 1) is outlined in red, the slot
  written in this step is green.

:func:`render_engine_step` is pure (record -> SVG), so the picture also shows in static
exports; :class:`EngineStepper` adds a slider and a play button, and falls back to the
picture of one chosen step when the notebook is opened without a kernel.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from html import escape
from typing import Any

from servelab.viz.blocks import SHARED, WRITE, render_blocks
from servelab.viz.picture import Picture, scoped_ids, with_static_picture

__all__ = ["EngineStepper", "render_engine_step", "show_engine_step"]

_CELL, _ROW = 44, 22


def _queues(record: Any) -> list[str]:
    prefills = ", ".join(
        f"{s} ({n} tokens, {c} cached)" if c else f"{s} ({n} tokens)"
        for s, (n, c) in record.prefills.items()
    )
    return [
        f"step {record.step}",
        "running (oldest first): " + (", ".join(map(str, record.running)) or "none"),
        "waiting (next first): " + (", ".join(map(str, record.waiting)) or "none"),
        "prefilled: "
        + (prefills or "none")
        + " · decoded: "
        + (", ".join(map(str, record.decodes)) or "none"),
        "preempted: "
        + (", ".join(map(str, record.preempted)) or "none")
        + " · finished: "
        + (", ".join(map(str, record.finished)) or "none")
        + " · copies: "
        + (", ".join(f"{s}\u2192{d}" for s, d in record.copies) or "none"),
    ]


def render_engine_step(record: Any, *, width: int = 760, title: str | None = None) -> str:
    """SVG of one recorded step: queues, then the block manager, then the slots read."""
    pad = 12
    lines = _queues(record)
    if title:
        lines[0] = f"{title} · {lines[0]}"
    queues_h = pad + 18 * len(lines)
    blocks = scoped_ids(render_blocks(record.blocks))
    blocks_w = int(_attr(blocks, "width"))
    blocks_h = int(_attr(blocks, "height"))
    reads = record.reads
    longest = max((len(v) for v in reads.values()), default=0)
    reads_top = queues_h + blocks_h + 16
    reads_h = 24 + _ROW * max(1, len(reads))
    total_w = max(width, blocks_w, 130 + longest * (_CELL + 2))
    total_h = reads_top + reads_h + pad
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
        f'viewBox="0 0 {total_w} {total_h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{total_w}" height="{total_h}" fill="white"/>',
    ]
    for i, line in enumerate(lines):
        weight = ' font-weight="bold" font-size="13"' if i == 0 else ""
        out.append(f'<text x="{pad}" y="{pad + 12 + 18 * i}"{weight}>{escape(line)}</text>')
    out.append(blocks.replace("<svg ", f'<svg x="0" y="{queues_h}" ', 1))
    out.append(
        f'<text x="{pad}" y="{reads_top + 12}" fill="#555">slots read by attention in this '
        "step (block:offset, by position; red: a shared block, green: written now)</text>"
    )
    refs = record.blocks.refcounts
    for row, (seq, slots) in enumerate(sorted(reads.items())):
        y = reads_top + 24 + row * _ROW
        out.append(f'<text x="{pad}" y="{y + 14}">sequence {seq}</text>')
        for j, (block, offset) in enumerate(slots):
            x = 110 + j * (_CELL + 2)
            fill = WRITE if j == len(slots) - 1 and seq in record.decodes else "#deebf7"
            stroke = SHARED if refs[block] > 1 else "#888"
            out.append(
                f'<g class="read" data-seq="{seq}" data-block="{block}" data-offset="{offset}">'
                f'<rect x="{x}" y="{y}" width="{_CELL}" height="{_ROW - 4}" fill="{fill}" '
                f'stroke="{stroke}"/><text x="{x + 4}" y="{y + 13}">{block}:{offset}</text></g>'
            )
    out.append("</svg>")
    return "\n".join(out)


def show_engine_step(record: Any, **options: Any) -> Any:
    """Display one recorded step as a picture (kept in static exports and untrusted views)."""
    display: Any = importlib.import_module("IPython.display")
    picture = Picture(render_engine_step(record, **options), alt="engine step")
    display.display(picture)
    return picture


def _attr(svg: str, name: str) -> str:
    head = svg[: svg.index(">")]
    start = head.index(f' {name}="') + len(name) + 3
    return head[start : head.index('"', start)]


class EngineStepper:
    """A slider over the recorded steps of an engine run, drawing :func:`render_engine_step`.

    ``static_step`` is the step (1-based) shown where no kernel runs; by default the first
    step with a preemption or a copy-on-write copy, else the last.
    """

    def __init__(self, records: Sequence[Any], *, static_step: int | None = None) -> None:
        if not records:
            raise ValueError("no steps recorded: build the engine with record=True and run it")
        self.records = list(records)
        if static_step is None:
            busy = [r.step for r in self.records if r.preempted or r.copies]
            static_step = busy[0] if busy else self.records[-1].step
        if not 1 <= static_step <= len(self.records):
            raise ValueError(f"static_step must be in 1..{len(self.records)}, got {static_step}")
        self.static_step = static_step
        self.position = static_step

    def svg(self) -> str:
        return render_engine_step(self.records[self.position - 1])

    def widget(self) -> Any:
        import ipywidgets as widgets

        n = len(self.records)
        picture = widgets.HTML(self.svg())
        slider = widgets.IntSlider(value=self.position, min=1, max=n, description="step")
        play = widgets.Play(value=self.position, min=1, max=n, interval=900)
        widgets.jslink((play, "value"), (slider, "value"))

        def redraw(change: Any) -> None:
            self.position = int(change["new"])
            picture.value = self.svg()

        slider.observe(redraw, names="value")
        box = widgets.VBox([widgets.HBox([play, slider]), picture])
        still = render_engine_step(self.records[self.static_step - 1])
        return with_static_picture(box, lambda: still, alt="engine step-through")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget()._repr_mimebundle_(**kwargs)
